import Foundation
import OutpostCore

/// The last outbox report (`Outpost-Outbox`) of each device this server
/// heard from in the last ten minutes: what `/metrics` says of devices
/// whose changes are not leaving them. A device whose pushes are refused
/// before they are read, or that never pushes at all, shows no error
/// here; its own report is the one place the server learns of it.
///
/// Kept in memory, per server: behind a load balancer each server sees
/// some of a device's requests, and every one carries the whole report,
/// so the largest figure across servers is the device's.
final class DeviceOutboxes: Sendable {
    /// How long a report counts: a device back after days offline reports
    /// its old changes once, then an empty outbox once they went through.
    static let window: TimeInterval = 600
    /// A change unconfirmed for longer than this marks its device as stuck.
    static let stuckAfter: TimeInterval = 3600

    private struct Report {
        var unsent: Int
        var oldestSeconds: Int?
        var at: Date
        /// When this server last logged the device as stuck.
        var loggedStuckAt: Date?
    }

    private struct State {
        var reports: [String: Report] = [:]  // "user\nclient"
        var countAtLastPrune = 0
    }

    /// What the devices heard from in the window reported, aged to now.
    struct Summary: Equatable {
        var devices = 0
        var largestUnsent = 0
        var oldestSeconds = 0
        var stuck = 0
    }

    private let state = Locked(State())
    private let log: @Sendable (String, [String: String]) -> Void

    init(log: @escaping @Sendable (String, [String: String]) -> Void = { ServerLog.warning($0, $1) }) {
        self.log = log
    }

    /// Keeps the report `request` carries, when it names a device and carries one.
    func note(_ request: HTTPRequest, user: String, at now: Date) {
        guard let device = DeviceSightings.device(request),
            let value = request.headers[OutboxReport.header.lowercased()], let report = OutboxReport(headerValue: value)
        else { return }
        let key = user + "\n" + device
        let stuck = report.oldestSeconds.map { TimeInterval($0) > Self.stuckAfter } ?? false
        let tell = state.withLock { state -> Bool in
            let previous = state.reports[key]
            // Said once an hour a device, not on each of its requests.
            let tell = stuck && (previous?.loggedStuckAt.map { now.timeIntervalSince($0) >= Self.stuckAfter } ?? true)
            state.reports[key] = Report(
                unsent: report.unsent, oldestSeconds: report.oldestSeconds, at: now,
                loggedStuckAt: tell ? now : (stuck ? previous?.loggedStuckAt : nil))
            // Devices that went quiet are dropped as new ones come, not only when scraped.
            if state.reports.count > 2 * state.countAtLastPrune + 1024 { Self.prune(&state, at: now) }
            return tell
        }
        if tell {
            log(
                "A device's changes are not leaving it: its oldest unconfirmed change is over an hour old",
                ["user": user, "device": device, "unsent": String(report.unsent), "oldest_seconds": String(report.oldestSeconds ?? 0)])
        }
    }

    func summary(at now: Date) -> Summary {
        state.withLock { state in
            Self.prune(&state, at: now)
            var summary = Summary()
            for report in state.reports.values {
                summary.devices += 1
                summary.largestUnsent = max(summary.largestUnsent, report.unsent)
                guard let oldest = report.oldestSeconds else { continue }
                let age = oldest + max(0, Int(now.timeIntervalSince(report.at)))
                summary.oldestSeconds = max(summary.oldestSeconds, age)
                if TimeInterval(age) > Self.stuckAfter { summary.stuck += 1 }
            }
            return summary
        }
    }

    private static func prune(_ state: inout State, at now: Date) {
        state.reports = state.reports.filter { now.timeIntervalSince($0.value.at) <= window }
        state.countAtLastPrune = state.reports.count
    }
}
