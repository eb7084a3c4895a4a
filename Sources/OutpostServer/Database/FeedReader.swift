import Foundation
import OutpostCore

/// Where pull pages are read from: the primary, or a streaming read replica
/// (`outpost serve --read-database`) when the replica has replayed every
/// commit this server has heard of.
///
/// Why switching between the two never makes a gap or moves a cursor back:
/// - Each page is read in one snapshot of one database and stops at that
///   snapshot's watermark (see `FeedWatermark`). On a hot standby the
///   snapshot is the replayed state: a transaction whose commit has not been
///   replayed counts as running, so versions below the watermark are final
///   there as on the primary.
/// - A cursor the replica has not reached (it came from the primary) finds
///   nothing above it on the replica, and an empty page returns the cursor it
///   was given.
/// - So a lagging replica only makes answers older. To keep them from being
///   older than what this server knows committed (a live channel woken by a
///   commit must see it), each commit heard records the primary's WAL
///   position, and a page is read from the replica only once the replica's
///   replay position, read before its snapshot, has reached it. Otherwise
///   the primary answers.
final class FeedReader: Sendable {
    let primary: any ServerDatabase
    let replica: (any ServerDatabase)?
    private let metrics: ServerMetrics

    private struct Positions {
        /// The primary's WAL position after the newest commit heard.
        var needed: UInt64 = 0
        /// The replica's replay position last read (it only grows).
        var replayed: UInt64 = 0
    }
    private let positions = Locked(Positions())

    init(primary: any ServerDatabase, replica: (any ServerDatabase)?, metrics: ServerMetrics) {
        self.primary = primary
        self.replica = replica
        self.metrics = metrics
    }

    /// A commit was heard (this server's or another's): the replica must
    /// reach the primary's current WAL position before it answers again.
    /// Runs before the waiting connections are woken.
    func committed() {
        guard replica != nil else { return }
        guard let text = try? primary.read({ try $0.first("SELECT CAST(pg_current_wal_lsn() AS TEXT)")?.optionalString(0) }),
            let position = Self.position(text)
        else {
            // The primary could not say: answer from it until it can.
            positions.withLock { $0.needed = .max }
            return
        }
        positions.withLock { $0.needed = max($0.needed == .max ? 0 : $0.needed, position) }
    }

    /// The database the next page is read from.
    func source() -> any ServerDatabase {
        guard let replica else { return primary }
        let current = positions.current
        if current.replayed >= current.needed {
            metrics.page(from: "replica")
            return replica
        }
        // Read before the page's snapshot is taken, so the snapshot holds at least this much.
        if let text = try? replica.read({ try $0.first("SELECT CAST(pg_last_wal_replay_lsn() AS TEXT)")?.optionalString(0) }),
            let replayed = Self.position(text)
        {
            let fresh = positions.withLock { positions -> Bool in
                positions.replayed = max(positions.replayed, replayed)
                return positions.replayed >= positions.needed
            }
            if fresh {
                metrics.page(from: "replica")
                return replica
            }
        }
        metrics.page(from: "primary")
        return primary
    }

    /// A WAL position `X/Y` (two hexadecimal halves) as one number.
    static func position(_ text: String) -> UInt64? {
        let halves = text.split(separator: "/")
        guard halves.count == 2, let high = UInt64(halves[0], radix: 16), let low = UInt64(halves[1], radix: 16) else {
            return nil
        }
        return high << 32 | low
    }
}
