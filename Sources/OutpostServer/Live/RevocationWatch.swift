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
        let window: (from: String, next: String)? = state.withLock { state in
            guard now - state.lastRead >= 1_000_000_000 else { return nil }
            state.lastRead = now
            let next = ServerTimestamp(clock.now().addingTimeInterval(-5)).rawValue
            return (state.since ?? next, next)
        }
        guard let window else { return [] }
        // The window moves on only after a read that worked: a read that
        // failed (a busy database under load) must not skip the
        // revocations it would have found.
        guard
            let rows = try? database.read({ sql in
                try sql.query("SELECT hash FROM tokens WHERE revoked_at IS NOT NULL AND revoked_at >= ?", [.text(window.from)])
            })
        else { return [] }
        state.withLock { $0.since = window.next }
        return Set(rows.map { $0.string(0) })
    }
}
