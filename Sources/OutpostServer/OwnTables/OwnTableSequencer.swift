import Foundation
import OutpostCore

/// Gives feed versions to the rows of mapped tables that someone other than
/// Outpost wrote (the app's backend, psql, a migration, a cascade), and to
/// the rows a table held before it was mapped.
///
/// Every `outpost serve` runs one; they take turns on an advisory lock, so
/// keys are sequenced in the order they were queued. The trigger's
/// notification wakes it at once; it also looks every second, so a
/// notification lost with a dropped connection delays a row, never loses it.
/// Each round is one transaction of Outpost's: its versions come from its
/// own transaction id and are read below the feed's watermark like any
/// other write, so the feed stays gap-free whatever the backend's
/// transactions do (a rolled-back one never queued anything).
package final class OwnTableSequencer: @unchecked Sendable {
    // @unchecked Sendable: the mutable state (`pending`, `stopped`) is guarded by `wakeups`.
    let database: any ServerDatabase
    let tables: [String: MappedTable]
    let clock: any WallClock
    /// Told what each round wrote (this process's live channels).
    let committed: @Sendable (CommitNotice) -> Void
    /// This process's tag on the notices each round announces to the other
    /// servers (`ServerDatabase.announce`), so it does not hear its own.
    let origin: String
    let log: @Sendable (String) -> Void

    private let wakeups = NSCondition()
    private var pending = false
    private var stopped = false

    /// Keys sequenced in one transaction (well below a transaction's 4,096 versions: a
    /// row whose owner changed takes two).
    static let keysPerRound = 1_000
    /// Existing rows given versions in one transaction of the backfill.
    static let rowsPerBackfillBatch = 2_000
    /// The advisory lock servers take turns on (its second half is the schema's).
    static let lockStatement = "SELECT pg_advisory_xact_lock(1333097585, hashtext(current_schema()))"

    init(
        database: any ServerDatabase, tables: [String: MappedTable], clock: any WallClock,
        origin: String, log: @escaping @Sendable (String) -> Void, committed: @escaping @Sendable (CommitNotice) -> Void
    ) {
        self.database = database
        self.tables = tables
        self.clock = clock
        self.origin = origin
        self.log = log
        self.committed = committed
    }

    /// Starts the background thread: the backfill of tables not yet done,
    /// then a round whenever woken, and every second.
    func start() {
        let thread = Thread { [weak self] in self?.run() }
        thread.name = "outpost-own-tables"
        thread.start()
    }

    /// A trigger noted a row: run a round soon.
    func wake() {
        wakeups.lock()
        pending = true
        wakeups.signal()
        wakeups.unlock()
    }

    func stop() {
        wakeups.lock()
        stopped = true
        wakeups.signal()
        wakeups.unlock()
    }

    private var isStopped: Bool {
        wakeups.lock()
        defer { wakeups.unlock() }
        return stopped
    }

    private func run() {
        var backfilled = false
        while !isStopped {
            do {
                if !backfilled {
                    try backfillAll()
                    backfilled = true
                }
                try drain()
            } catch {
                if !isStopped { log("own tables: \(error); trying again in a second") }
            }
            wakeups.lock()
            if !pending && !stopped { _ = wakeups.wait(until: Date(timeIntervalSinceNow: 1)) }
            pending = false
            wakeups.unlock()
        }
    }

    /// Runs rounds until the queue is empty; returns how many keys were looked at.
    @discardableResult
    package func drain() throws -> Int {
        var total = 0
        while true {
            let count = try round()
            total += count
            if count < Self.keysPerRound { return total }
        }
    }

    /// One round: up to `keysPerRound` queued keys, oldest first, sequenced
    /// and removed from the queue in one transaction.
    func round() throws -> Int {
        var notice = CommitNotice()
        let count = try database.write { sql -> Int in
            notice = CommitNotice()
            _ = try sql.query(Self.lockStatement, [])
            // Keys a push is settling right now are skipped: it sequences them itself.
            let queued = try sql.query(
                "SELECT collection, uuid FROM own_table_pending ORDER BY queued LIMIT \(Self.keysPerRound) FOR UPDATE SKIP LOCKED",
                [])
            guard !queued.isEmpty else { return 0 }
            var byCollection: [String: [String]] = [:]
            for row in queued { byCollection[row.string(0), default: []].append(row.string(1)) }
            var versions = try FeedVersions.begin(sql)
            let now = ServerTimestamp(clock.now())
            for (collection, keys) in byCollection.sorted(by: { $0.key < $1.key }) {
                // A collection no longer mapped: its queue rows are only removed.
                if let table = tables[collection] {
                    try OwnTableCopies.settle(
                        table, keys: keys, versions: &versions, now: now, notice: &notice, in: sql)
                }
                try sql.execute(
                    "DELETE FROM own_table_pending WHERE collection = ? AND uuid = ANY(CAST(? AS text[]))",
                    [.text(collection), OwnTableCopies.arrayLiteral(keys)])
            }
            try versions.finish(sql)
            if !notice.isEmpty { try database.announce(notice.payload(origin: origin), in: sql) }
            return queued.count
        }
        committed(notice)
        return count
    }

    /// Gives every table's existing rows their versions (a no-op for a table done before).
    package func backfillAll() throws {
        for table in tables.values.sorted(by: { $0.name < $1.name }) {
            while try !backfillBatch(table) {}
        }
    }

    /// One batch of `table`'s existing rows, in key order after the last
    /// batch's, each given a copy, a version and a history row, without
    /// locking the table's rows (the backend goes on writing; what it
    /// writes meanwhile is queued and sequenced as usual). Returns whether
    /// the table is done. Progress commits with the batch: a server killed
    /// mid-backfill goes on from there at its next start.
    func backfillBatch(_ table: MappedTable) throws -> Bool {
        var notice = CommitNotice()
        let done = try database.write { sql -> Bool in
            notice = CommitNotice()
            _ = try sql.query(Self.lockStatement, [])
            guard
                let progress = try sql.first(
                    "SELECT backfilled_through, backfill_done FROM own_tables WHERE collection = ?\(sql.forUpdate)",
                    [.text(table.name)])
            else { return true }
            if progress.bool(1) { return true }
            let after = progress.optionalString(0)
            let key = "r.\(table.key.quoted)"
            let keys = try sql.query(
                """
                SELECT CAST(\(key) AS text) FROM \(table.tableSQL) r
                WHERE CAST(? AS text) IS NULL OR \(key) > CAST(? AS \(table.key.sqlType))
                ORDER BY \(key) LIMIT \(Self.rowsPerBackfillBatch)
                """, [.text(after), .text(after)]
            ).map { $0.string(0) }
            guard let last = keys.last else {
                try sql.execute("UPDATE own_tables SET backfill_done = 1 WHERE collection = ?", [.text(table.name)])
                return true
            }
            var versions = try FeedVersions.begin(sql)
            let first = try versions.reserve(keys.count)
            let now = ServerTimestamp(clock.now()).rawValue
            let team =
                table.team.map { "COALESCE(CAST(r.\($0.quoted) AS text), '')" }
                ?? "COALESCE((SELECT k.team FROM tokens k WHERE k.user_id = CAST(r.\(table.owner.quoted) AS text) ORDER BY k.created_at DESC LIMIT 1), '')"
            let window = table.mapping.windowField.flatMap(table.field).map { OwnTableSQL.value($0, of: "r") } ?? "NULL"
            try sql.execute(
                """
                WITH copied AS (
                    INSERT INTO records (collection, uuid, version, updated_at, deleted, owner, team, created_by_user,
                        created_by_client, window_at, data)
                    SELECT ?, CAST(\(key) AS text), CAST(? AS BIGINT) + row_number() OVER (ORDER BY \(key)), ?, 0,
                        CAST(r.\(table.owner.quoted) AS text), \(team), CAST(r.\(table.owner.quoted) AS text), '', \(window),
                        \(OwnTableSQL.dataText(table, row: "r"))
                    FROM \(table.tableSQL) r WHERE \(key) = ANY(CAST(? AS \(table.key.sqlType)[]))
                    ON CONFLICT (collection, uuid) DO NOTHING
                    RETURNING uuid, version, owner, team
                )
                INSERT INTO record_history (collection, uuid, version, op, at, user_id, client_id, device_time, owner, team, data)
                SELECT ?, uuid, version, 'create', ?, '', '', NULL, owner, team, NULL FROM copied
                """,
                [
                    .text(table.name), .integer(first), .text(now), OwnTableCopies.arrayLiteral(keys), .text(table.name),
                    .text(now),
                ])
            try sql.execute(
                "UPDATE own_tables SET backfilled_through = ?, backfill_done = ? WHERE collection = ?",
                [.text(last), .bool(keys.count < Self.rowsPerBackfillBatch), .text(table.name)])
            notice.wakesAll = true
            try versions.finish(sql)
            try database.announce(PostgresCommitListener.everything, in: sql)
            return keys.count < Self.rowsPerBackfillBatch
        }
        committed(notice)
        return done
    }
}
