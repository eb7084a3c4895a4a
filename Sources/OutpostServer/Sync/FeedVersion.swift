import Foundation
import OutpostCore

/// The versions one write transaction gives the changes it makes, which
/// order the change feed (records, scope exits).
///
/// On SQLite there is one writer at a time, so versions come from a counter
/// in `server_state`, read and saved inside the write transaction.
///
/// On PostgreSQL writers run in parallel and no row every writer updates may
/// exist (it would serialise them all again). A transaction's versions are
/// instead derived from its own transaction id: `base + xid × 4096 + n`, for
/// its n-th change. Transaction ids are handed out in increasing order and
/// never reused, so versions are unique; two transactions' versions never
/// interleave. What makes the feed gap-free is ``FeedWatermark``: a reader
/// returns only versions below the oldest transaction still running.
package struct FeedVersions {
    /// Changes one transaction may make on PostgreSQL. A push carries at most
    /// 500; bulk loads write in chunks below this.
    static let perTransaction: Int64 = 1 << shift
    static let shift: Int64 = 12

    /// The highest version used so far (or the one before the first).
    fileprivate(set) var last: Int64
    private let counter: Bool
    private let start: Int64

    /// Starts a transaction's versions; the first statement of every write
    /// that makes changes (on PostgreSQL it gives the transaction its id).
    package static func begin(_ sql: any SQLExecutor) throws -> FeedVersions {
        switch sql.dialect {
        case .sqlite:
            let current =
                try sql.first("SELECT value FROM server_state WHERE key = 'version'").flatMap { Int64($0.string(0)) } ?? 0
            return FeedVersions(last: current, counter: true, start: current)
        case .postgres:
            guard
                let row = try sql.first(
                    """
                    SELECT CAST(value AS BIGINT) + (CAST(CAST(pg_current_xact_id() AS TEXT) AS BIGINT) << \(shift))
                    FROM server_state WHERE key = 'feed_base'
                    """),
                let base = row.optionalInt(0)
            else { throw DatabaseError(kind: .failure, message: "the feed's base version is missing; migrations did not run") }
            return FeedVersions(last: base, counter: false, start: base)
        }
    }

    /// The next version.
    package mutating func next() throws -> Int64 {
        guard counter || last - start + 1 < Self.perTransaction else {
            throw DatabaseError(
                kind: .failure, message: "one transaction may make at most \(Self.perTransaction - 1) changes to the feed")
        }
        last += 1
        return last
    }

    /// Sets aside the next `count` versions for a statement that numbers
    /// its rows itself (`first + 1`, `first + 2`, …); returns `first`.
    package mutating func reserve(_ count: Int) throws -> Int64 {
        guard counter || last - start + Int64(count) < Self.perTransaction else {
            throw DatabaseError(
                kind: .failure, message: "one transaction may make at most \(Self.perTransaction - 1) changes to the feed")
        }
        let first = last
        last += Int64(count)
        return first
    }

    /// The versions handed out so far, in order (nil before the first).
    package var issued: ClosedRange<Int64>? { last > start ? (start + 1)...last : nil }

    /// Throws ``FeedVersionBehind`` when `existing` (a locked row's version)
    /// is above every version this transaction has used: a transaction with
    /// a later id updated the row and committed first, and writing it here
    /// would move its version back. The write is retried as a new
    /// transaction, whose id (hence versions) comes after that one. (A row
    /// this transaction wrote itself is at or below `last`.)
    func requireNewer(than existing: Int64) throws {
        if existing > last { throw FeedVersionBehind(existing: existing, last: last) }
    }

    /// Saves the counter (SQLite) when changes were made.
    package func finish(_ sql: any SQLExecutor) throws {
        guard counter, last != start else { return }
        try sql.execute("UPDATE server_state SET value = ? WHERE key = 'version'", [.text(String(last))])
    }
}

/// A write met a record that a later transaction had already written; the
/// database retries the whole transaction (see ``FeedVersions/requireNewer(than:)``).
struct FeedVersionBehind: Error, CustomStringConvertible {
    var existing: Int64
    var last: Int64
    var description: String { "a record at version \(existing) was written by a newer transaction (this one is at \(last))" }
}

/// What a reader may return of the feed, read in its own snapshot.
///
/// On PostgreSQL a transaction still running may hold versions below those
/// of transactions that already committed. Every version below
/// `base + xmin × 4096`, where xmin is the oldest transaction id still
/// running in the reader's snapshot, belongs to a transaction that has
/// ended: either it committed and its rows are in the snapshot, or it rolled
/// back and they never will be. Any transaction that gets an id later gets a
/// larger one. So a page cut below this bound can never be followed by a
/// commit below its cursor.
///
/// Transaction ids belong to the whole PostgreSQL cluster, not to one
/// database: a long transaction of another application in another database
/// of the same cluster would otherwise hold every page back for as long as
/// it runs, and devices would see nothing new. Running transactions whose
/// backend is connected to another database are left out of the minimum:
/// a transaction never changes database, so it cannot write this feed. One
/// that ended before `pg_stat_activity` was read, or whose database is not
/// known (a prepared transaction, one replayed on a standby), still counts.
struct FeedWatermark {
    /// Versions below this are final.
    var bound: Int64
    /// Deletions up to this version are purged (an older cursor needs a resync).
    var purgedThrough: Int64
    /// No version the server has handed out is at or above this: a cursor
    /// past it came from a feed this database no longer holds (a power loss
    /// took the last commits, or a backup was restored without
    /// `outpost feed restart`), and must be answered 410, never an empty page.
    var end: Int64

    /// Whether a cursor at `version` stands past the end of the feed.
    func isPastEnd(_ version: Int64) -> Bool { version >= end }

    static func read(_ sql: any SQLExecutor) throws -> FeedWatermark {
        switch sql.dialect {
        case .sqlite:
            var purged: Int64 = 0
            var last: Int64 = 0
            for row in try sql.query("SELECT key, value FROM server_state WHERE key IN ('purged_through', 'version')", []) {
                let value = Int64(row.string(1)) ?? 0
                if row.string(0) == "version" { last = value } else { purged = value }
            }
            return FeedWatermark(bound: .max, purgedThrough: purged, end: last + 1)
        case .postgres:
            // One round trip, and in the transaction's own snapshot (a
            // REPEATABLE READ transaction keeps the snapshot of its first
            // statement, which `pg_current_snapshot()` reports). The bound
            // is the oldest running transaction that may write here, or the
            // snapshot's xmax (one past the newest that ended) when none is.
            // `NOT IN` over a subquery is hashed: pg_stat_activity is read
            // once, and only when some transaction is running.
            let row = try sql.first(
                """
                SELECT (SELECT value FROM server_state WHERE key = 'purged_through'),
                    (SELECT CAST(value AS BIGINT) FROM server_state WHERE key = 'feed_base')
                    + (CAST(CAST(COALESCE(
                        (SELECT MIN(running) FROM pg_snapshot_xip(pg_current_snapshot()) AS running
                         WHERE CAST(running AS xid) NOT IN (
                            SELECT backend_xid FROM pg_stat_activity
                            WHERE backend_xid IS NOT NULL
                                AND datid <> (SELECT oid FROM pg_database WHERE datname = current_database()))),
                        pg_snapshot_xmax(pg_current_snapshot())) AS TEXT) AS BIGINT) << \(FeedVersions.shift)),
                    (SELECT CAST(value AS BIGINT) FROM server_state WHERE key = 'feed_base')
                    + (CAST(CAST(pg_snapshot_xmax(pg_current_snapshot()) AS TEXT) AS BIGINT) << \(FeedVersions.shift))
                """)
            // Every transaction that ended has an id below the snapshot's
            // xmax, so every version handed out is below `base + xmax × 4096`.
            guard let row, let bound = row.optionalInt(1), let end = row.optionalInt(2) else {
                throw DatabaseError(kind: .failure, message: "the feed's base version is missing; migrations did not run")
            }
            return FeedWatermark(bound: bound, purgedThrough: Int64(row.string(0)) ?? 0, end: end)
        }
    }
}

extension FeedVersions {
    /// The highest version the feed holds (records and scope exits).
    private static func highestStored(_ sql: any SQLExecutor) throws -> Int64 {
        let records = try sql.first("SELECT MAX(version) FROM records")?.optionalInt(0) ?? 0
        let exits = try sql.first("SELECT MAX(version) FROM scope_exits")?.optionalInt(0) ?? 0
        return max(records, exits)
    }

    /// PostgreSQL: makes the next transaction's versions come after every
    /// stored one. Transaction ids restart when a dump is restored into
    /// another cluster; versions made from them would then fall below the
    /// restored ones (colliding, or moving records back). Run at start, under
    /// the migration lock; changes nothing in the usual case.
    package static func keepAhead(_ database: any ServerDatabase) throws {
        guard database.dialect == .postgres else { return }
        try database.write { sql in
            _ = try sql.query(PostgresDatabase.writeLockStatement, [])
            let versions = try begin(sql)
            let highest = try highestStored(sql)
            guard versions.last < highest else { return }
            try sql.execute(
                "UPDATE server_state SET value = CAST(CAST(value AS BIGINT) + ? AS TEXT) WHERE key = 'feed_base'",
                [.integer(highest - versions.last + perTransaction)])
        }
    }

    /// After a backup of the server's database was restored: devices may hold
    /// cursors from after the backup, past what the restored feed holds, and
    /// would miss what is written next. This moves the feed far past any
    /// cursor ever handed out and marks everything before as purged, so every
    /// device's next pull is answered `410 resync_required` and it downloads
    /// its scope again, keeping its unsent changes. Returns what it did.
    @discardableResult
    package static func restart(_ database: any ServerDatabase) throws -> Restart {
        try database.write { sql in
            if sql.dialect == .postgres { _ = try sql.query(PostgresDatabase.writeLockStatement, []) }
            var versions = try begin(sql)
            let stored = try highestStored(sql)
            let highest = max(stored, versions.last)
            // The previous restart's start, kept under a key of its own:
            // `purged_through` alone is also moved by tombstone purges.
            let previous = try sql.first(
                """
                SELECT r.value FROM server_state r JOIN server_state p ON p.key = 'purged_through' AND p.value = r.value
                WHERE r.key = 'feed_restart'
                """)?.optionalString(0).flatMap { Int64($0) }
            // Far beyond anything issued since the backup (transaction ids of
            // the lost cluster included), and still far below 2^53.
            let start = highest + restartMargin
            switch sql.dialect {
            case .sqlite:
                versions.last = start
                try versions.finish(sql)
            case .postgres:
                try sql.execute(
                    "UPDATE server_state SET value = CAST(CAST(value AS BIGINT) + ? AS TEXT) WHERE key = 'feed_base'",
                    [.integer(start - versions.last)])
            }
            try sql.execute("UPDATE server_state SET value = ? WHERE key = 'purged_through'", [.text(String(start))])
            try sql.execute("DELETE FROM server_state WHERE key = 'feed_restart'", [])
            try sql.execute("INSERT INTO server_state (key, value) VALUES ('feed_restart', ?)", [.text(String(start))])
            return Restart(start: start, highestStored: stored, unusedPrevious: previous.flatMap { stored < $0 ? $0 : nil })
        }
    }

    /// What `restart` did.
    package struct Restart: Sendable {
        /// The feed's new start: every cursor below it is answered 410.
        package var start: Int64
        /// The newest version a record or scope exit holds (0: none).
        package var highestStored: Int64
        /// The start of the previous restart when nothing has been written
        /// since it: that restart had already done what a restore needs.
        package var unusedPrevious: Int64?
    }

    /// 2^44: room for 4 billion transactions' versions past the highest
    /// stored one.
    static let restartMargin: Int64 = 1 << 44
}
