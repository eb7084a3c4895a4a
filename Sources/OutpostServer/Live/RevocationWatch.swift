import Foundation
import OutpostCore

/// Notices tokens revoked by any process sharing the database, so their
/// live streams end within a second instead of at the next heartbeat.
/// Asked on the live hub's clock while connections wait; reads at most once
/// a second.
final class RevocationWatch: Sendable {
    private struct State {
        var lastRead: UInt64 = 0
        var since: String?
    }

    private let database: any ServerDatabase
    private let clock: any WallClock
    private let state = Locked(State())

    init(database: any ServerDatabase, clock: any WallClock) {
        self.database = database
        self.clock = clock
    }

    /// Hashes of tokens revoked since the last read (with a margin, so a
    /// revocation committed while the last read ran is not missed).
    func recentlyRevoked() -> Set<String> {
        let now = DispatchTime.now().uptimeNanoseconds
        let since: String? = state.withLock { state in
            guard now - state.lastRead >= 1_000_000_000 else { return nil }
            state.lastRead = now
            let from = state.since ?? ServerTimestamp(clock.now().addingTimeInterval(-5)).rawValue
            state.since = ServerTimestamp(clock.now().addingTimeInterval(-5)).rawValue
            return from
        }
        guard let since else { return [] }
        let rows = (try? database.read { sql in
            try sql.query("SELECT hash FROM tokens WHERE revoked_at IS NOT NULL AND revoked_at >= ?", [.text(since)])
        }) ?? []
        return Set(rows.map { $0.string(0) })
    }
}
