import Foundation
import OutpostCore
import OutpostSQLite

extension LocalStore {
    static let retentionKey = "retention.last_run"

    /// Removes synced copies older than their collection's retention limit
    /// Runs at the end of a complete pull, inside its
    /// transaction, at most once a day: finding old rows reads the whole
    /// table, and a limit counted in days needs no finer step.
    ///
    /// `now` is the server's time from the pull, never the device's clock.
    func applyRetention(now: ServerTimestamp) throws -> Set<String> {
        let limited = registry.all.filter { $0.retention != nil }
        guard !limited.isEmpty, let serverNow = now.date else { return [] }
        if let last = try kvValue(Self.retentionKey).flatMap({ ServerTimestamp(rawValue: $0).date }),
            serverNow.timeIntervalSince(last) < 86_400, serverNow >= last
        {
            return []
        }
        var purged: Set<String> = []
        for descriptor in limited {
            guard let retention = descriptor.retention else { continue }
            let cutoff = ServerTimestamp(serverNow - retention).rawValue
            let removed = try RecordTable(descriptor.name, connection).removeSynced(updatedBefore: cutoff)
            if removed > 0 { purged.insert(descriptor.name) }
        }
        try setKV(Self.retentionKey, now.rawValue)
        return purged
    }
}
