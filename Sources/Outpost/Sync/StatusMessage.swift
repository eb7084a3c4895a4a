public import Foundation
import OutpostCore

/// Plain, non-blaming sentences for each situation. Data without
/// a timestamp is never described as current.
public enum StatusMessage {
    /// The sentence a status bar shows for this status.
    public static func text(for status: SyncStatus, timeZone: TimeZone = .current, locale: Locale = .current) -> String {
        let updated = status.dataUpdatedAt.flatMap(\.date).map { describe($0, timeZone: timeZone, locale: locale) }
        let changes = status.unsent == 1 ? "your change" : "your changes"
        if status.signInRequired {
            return "Your session has expired. Sign in again to send \(changes); nothing on this device is lost."
        }
        if status.lastError == .accessRevoked {
            return "This device no longer has access. Ask your coordinator before signing in again."
        }
        if let progress = status.progress, status.isSyncing {
            return "Downloading \(progress.done.formatted()) of \(progress.total.formatted()) records…"
        }
        switch status.connectivity {
        case .offline:
            let seen = updated.map { "You can see data synced on \($0)" } ?? "Nothing has been downloaded yet, but you can capture new records"
            let tail = status.unsent > 0 ? "; \(changes) will be sent when you're back online." : "."
            return "You're offline. \(seen)\(tail)"
        case .degraded:
            if status.unsent > 0 {
                return status.unsent == 1
                    ? "The connection is slow. Your change is not confirmed yet."
                    : "The connection is slow. \(status.unsent) changes are not confirmed yet."
            }
            return "The connection is slow." + (updated.map { " Data shown was updated on \($0)." } ?? "")
        case .unknown, .online:
            break
        }
        if status.rejected > 0 {
            return status.rejected == 1
                ? "1 change was not accepted. Open it to see what to fix."
                : "\(status.rejected) changes were not accepted. Open them to see what to fix."
        }
        if status.conflicts > 0 {
            return status.conflicts == 1
                ? "Someone else changed a record you edited. Your version is kept so you can apply it again."
                : "Someone else changed \(status.conflicts) records you edited. Your versions are kept so you can apply them again."
        }
        if status.isSyncing { return "Syncing…" }
        if status.unsent > 0 {
            return status.unsent == 1 ? "1 change is waiting to be sent." : "\(status.unsent) changes are waiting to be sent."
        }
        if let updated { return "All changes sent. Data updated on \(updated)." }
        return status.connectivity == .unknown ? "Checking the connection…" : "Not synced yet."
    }

    /// "3 Aug at 09:42", in the person's time zone.
    public static func describe(_ date: Date, timeZone: TimeZone, locale: Locale) -> String {
        let formatter = DateFormatter()
        formatter.locale = locale
        formatter.timeZone = timeZone
        formatter.dateFormat = "d MMM 'at' HH:mm"
        return formatter.string(from: date)
    }
}
