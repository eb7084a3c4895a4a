package import Foundation
package import OutpostCore
package import OutpostSQLite

/// The `outbox` table: changes waiting for the server, in the order they
/// were made (`Outbox` decides what goes in and out; the SQL is here).
package struct OutboxTable {
    let connection: SQLiteConnection

    package init(connection: SQLiteConnection) { self.connection = connection }

    /// The operation's constraint (`MembershipCheck`: not `IN`, which
    /// SQLite evaluates slowly).
    static let opCheck = MembershipCheck(column: "op", values: ["create", "update", "delete"])

    /// `seq` stays NULL until the entry is first put into a push; from then
    /// on the server may hold it, so it is never merged or cancelled.
    /// Every index is one more page written per local write, so there are
    /// only the ones a lookup needs: no AUTOINCREMENT (a new entry always
    /// numbers after every live one), no index on mutation_id (made unique
    /// by UUIDv7, never looked up), and the seq index only holds entries
    /// that were sent.
    static let definition = """
        CREATE TABLE outbox (
            entry       INTEGER PRIMARY KEY,
            mutation_id TEXT NOT NULL,
            collection  TEXT NOT NULL,
            record_uuid TEXT NOT NULL,
            op          TEXT NOT NULL \(opCheck),
            base_version INTEGER,
            data        TEXT,
            parents     TEXT NOT NULL DEFAULT '',
            seq         INTEGER,
            attempts    INTEGER NOT NULL DEFAULT 0,
            failures    INTEGER NOT NULL DEFAULT 0,
            -- 1 when the last send got no answer: the server may hold it
            -- ("checking result"); 0 when it surely did not.
            unknown_outcome INTEGER NOT NULL DEFAULT 0,
            last_error  TEXT,
            queued_at   TEXT NOT NULL
        );
        """

    /// The indexes made with the table. The seq index is partial: a new
    /// entry (no seq yet) writes nothing to it.
    static let baseIndexes = [
        "CREATE INDEX outbox_by_record ON outbox (collection, record_uuid, entry);",
        "CREATE UNIQUE INDEX outbox_by_seq ON outbox (seq) WHERE seq IS NOT NULL;",
    ]

    /// What the queue's status counts after every settled push, found
    /// without reading the whole queue (`Outbox.summary`). Both partial: an
    /// ordinary local write (no parents, never sent) writes neither.
    static let summaryIndexes = [
        "CREATE INDEX outbox_with_parents ON outbox (entry) WHERE parents != '';",
        "CREATE INDEX outbox_unknown_outcome ON outbox (entry) WHERE unknown_outcome != 0;",
    ]

    /// What every sync cycle asks first (entries whose retry budget is
    /// spent), found without reading the queue; partial, so a write that
    /// was never refused writes nothing to it.
    static let failingIndex = "CREATE INDEX outbox_failing ON outbox (entry) WHERE failures > 0;"

    package static func create(in connection: SQLiteConnection) throws {
        try connection.execute(definition)
        for index in baseIndexes { try connection.execute(index) }
    }

    package static func createSummaryIndexes(in connection: SQLiteConnection) throws {
        for index in summaryIndexes { try connection.execute(index) }
    }

    package static func createFailingIndex(in connection: SQLiteConnection) throws {
        try connection.execute(failingIndex)
    }

    /// Stores made before the quick check hold `op IN (…)`: the table is
    /// made again from `definition`, every entry kept with its number. Runs
    /// before the later indexes are added, so only the base ones are made again.
    package static func rebuildLegacyChecks(in connection: SQLiteConnection) throws {
        guard try TableRebuild.definition(of: "outbox", contains: opCheck.legacyText, in: connection) else { return }
        try TableRebuild.rebuild("outbox", create: definition, indexes: baseIndexes, in: connection)
    }

    /// Entries whose `data` is still in clear text (a store opened with a
    /// cipher for the first time seals them).
    func clearPayloads() throws -> [(key: SQLiteValue, text: String)] {
        try connection.query("SELECT entry, data FROM outbox WHERE typeof(data) = 'text'") { ($0.value(0), $0.string(1)) }
    }

    func setPayload(_ key: SQLiteValue, _ value: SQLiteValue) throws {
        try connection.run("UPDATE outbox SET data = ? WHERE entry = ?", [value, key])
    }
}

// MARK: Statements

extension OutboxTable {
    /// Rows in `order`, read by `OutboxRow` (`map`); `condition` is one of
    /// the queue's own conditions (`OutboxStatusQueries`, seq tests).
    func select<T>(
        where condition: String = "1", _ values: [SQLiteValue] = [], order: String = "entry", limit: Int? = nil,
        _ map: (SQLiteRow) throws -> T
    ) throws -> [T] {
        try connection.query(
            "SELECT \(OutboxRow.columns) FROM outbox WHERE \(condition) ORDER BY \(order)" + (limit.map { " LIMIT \($0)" } ?? ""),
            values, map)
    }

    /// The record's entries, in order.
    static let ofRecord = "collection = ? AND record_uuid = ?"

    /// Entries that were sent (ordered by `seqOrder`: the server must see
    /// seqs in increasing order).
    static let sent = "seq IS NOT NULL"
    static let seqOrder = "seq"

    /// Never-sent entries after the entry number bound as `?`.
    static let unsentAfter = "seq IS NULL AND entry > ?"

    /// Never-sent entries with a payload (changes an attachment may be named in).
    static let unsentWithData = "seq IS NULL AND data IS NOT NULL"

    /// A damaged entry's columns as stored, for whoever investigates.
    func raw(_ entry: Int64) throws -> (collection: String, uuid: String, op: String, seq: Int64?, parents: String, data: String)? {
        try connection.first(
            "SELECT collection, record_uuid, op, seq, parents, quote(data) FROM outbox WHERE entry = ?", [.integer(entry)]
        ) { (collection: $0.string(0), uuid: $0.string(1), op: $0.string(2), seq: $0.optionalInt64(3), parents: $0.string(4), data: $0.string(5)) }
    }

    /// Queues an entry after every other (`data`: stored as the payload codec wrote it).
    package func insert(
        mutationID: UUID, record: RecordReference, op: MutationOp, baseVersion: Int64?, data: SQLiteValue, parents: String,
        queuedAt: String
    ) throws {
        try connection.run(
            """
            INSERT INTO outbox (mutation_id, collection, record_uuid, op, base_version, data, parents, queued_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(mutationID.wireText), .text(record.collection), .text(record.uuid.wireText), .text(op.rawValue),
                .integer(baseVersion), data, .text(parents), .text(queuedAt),
            ])
    }

    /// Puts an entry back at its own place in the queue (its number), with no seq.
    package func insert(
        entry: Int64, mutationID: UUID, record: RecordReference, op: MutationOp, baseVersion: Int64?, data: SQLiteValue,
        parents: String, queuedAt: String
    ) throws {
        try connection.run(
            """
            INSERT INTO outbox (entry, mutation_id, collection, record_uuid, op, base_version, data, parents, queued_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .integer(entry), .text(mutationID.wireText), .text(record.collection), .text(record.uuid.wireText),
                .text(op.rawValue), .integer(baseVersion), data, .text(parents), .text(queuedAt),
            ])
    }

    /// Replaces a never-sent entry's content (a sent one is never rewritten).
    package func rewrite(
        _ entry: Int64, mutationID: UUID, op: MutationOp, baseVersion: Int64?, data: SQLiteValue, parents: String,
        queuedAt: String
    ) throws {
        try connection.run(
            """
            UPDATE outbox SET mutation_id = ?, op = ?, base_version = ?, data = ?, parents = ?, queued_at = ?
            WHERE entry = ? AND seq IS NULL
            """,
            [
                .text(mutationID.wireText), .text(op.rawValue), .integer(baseVersion), data, .text(parents), .text(queuedAt),
                .integer(entry),
            ])
    }

    package func remove(_ entry: Int64) throws {
        try connection.run("DELETE FROM outbox WHERE entry = ?", [.integer(entry)])
    }

    /// Removes entries by number, in one statement.
    func remove(_ entries: [Int64]) throws {
        try connection.run(OutboxSettleQueries.removing, [.text(JSONWriter.text(.array(entries.map { .int($0) })))])
    }

    package func removeAll(of record: RecordReference) throws {
        try connection.run(
            "DELETE FROM outbox WHERE collection = ? AND record_uuid = ?", [.text(record.collection), .text(record.uuid.wireText)])
    }

    package func removeUnsent(of record: RecordReference) throws {
        try connection.run(
            "DELETE FROM outbox WHERE collection = ? AND record_uuid = ? AND seq IS NULL",
            [.text(record.collection), .text(record.uuid.wireText)])
    }

    /// Whether a create of the record is queued (sent or not).
    /// Queued changes that carry data, oldest first, as "op uuid" (the
    /// simulation's damaged-disk fault picks one of them).
    package func entriesWithData() throws -> [(entry: Int64, description: String)] {
        try connection.query("SELECT entry, op, record_uuid FROM outbox WHERE data IS NOT NULL ORDER BY entry") {
            (entry: $0.int64(0), description: "\($0.string(1)) \($0.string(2))")
        }
    }

    /// Overwrites an entry's data with JSON that does not parse: what a bad
    /// sector or another program leaves, for the simulation's fault.
    package func damageData(of entry: Int64) throws {
        _ = try connection.run("UPDATE outbox SET data = '{\"broken' WHERE entry = ?", [.integer(entry)])
    }

    package func hasCreate(of record: RecordReference) throws -> Bool {
        try connection.first(
            "SELECT 1 FROM outbox WHERE collection = ? AND record_uuid = ? AND op = 'create'",
            [.text(record.collection), .text(record.uuid.wireText)]
        ) { _ in true } ?? false
    }

    package func holds(seq: Int64) throws -> Bool {
        try connection.first("SELECT 1 FROM outbox WHERE seq = ?", [.integer(seq)]) { _ in true } != nil
    }

    /// Numbers of the entries that were sent (have a seq).
    package func sentEntries() throws -> [Int64] {
        try connection.query("SELECT entry FROM outbox WHERE seq IS NOT NULL", []) { $0.int64(0) }
    }

    package func count() throws -> Int {
        try connection.first("SELECT COUNT(*) FROM outbox") { Int($0.int64(0)) } ?? 0
    }

    /// The device time of the queue's first entry (one row, by the primary key).
    func headQueuedAt() throws -> String? {
        try connection.first("SELECT queued_at FROM outbox ORDER BY entry LIMIT 1") { $0.string(0) }
    }

    /// How many of `entries` (numbers, comma-separated) are queued.
    func count(in entries: String) throws -> Int {
        try connection.first("SELECT COUNT(*) FROM outbox WHERE entry IN (\(entries))") { Int($0.int64(0)) } ?? 0
    }

    /// Entries whose last send got no answer, but for `inFlight`.
    func checkingCount(notIn inFlight: String) throws -> Int {
        try connection.first(OutboxStatusQueries.checkingCount(notIn: inFlight)) { Int($0.int64(0)) } ?? 0
    }

    /// Gives never-sent entries (`entries`, in order) the seqs from `first` on, in one statement.
    package func number(_ entries: [Int64], from first: Int64) throws {
        try connection.run(OutboxSeqQueries.numbering, [.integer(first), .text(JSONWriter.text(.array(entries.map { .int($0) })))])
    }

    /// Withdraws seqs no server saw.
    package func clearSeqs(_ seqs: ClosedRange<Int64>) throws {
        try connection.run("UPDATE outbox SET seq = NULL WHERE seq BETWEEN ? AND ?", [.integer(seqs.lowerBound), .integer(seqs.upperBound)])
    }

    /// Gives a sent entry a new seq (the server had the old one from another timeline).
    package func renumber(_ entry: Int64, from old: Int64, to new: Int64) throws {
        try connection.run(
            "UPDATE outbox SET seq = ?, unknown_outcome = 0 WHERE entry = ? AND seq = ?",
            [.integer(new), .integer(entry), .integer(old)])
    }

    /// A send that produced no result for this entry.
    func noteNoResult(_ entry: Int64) throws {
        try connection.run(
            "UPDATE outbox SET attempts = attempts + 1, last_error = 'no result in the answer' WHERE entry = ?", [.integer(entry)])
    }

    /// A push that failed whole: one more attempt, and a failure when it
    /// spends the retry budget; `outcomeUnknown` when the server may hold it.
    package func noteFailure(_ entry: Int64, consumesBudget: Bool, message: String, outcomeUnknown: Bool) throws {
        try connection.run(
            """
            UPDATE outbox SET attempts = attempts + 1, failures = failures + ?, last_error = ?,
                unknown_outcome = CASE WHEN ? THEN 1 ELSE unknown_outcome END
            WHERE entry = ?
            """,
            [.integer(consumesBudget ? 1 : 0), .text(message), .integer(outcomeUnknown ? 1 : 0), .integer(entry)])
    }

    /// Conditions the record's later never-sent edits on `version`. (`+seq`
    /// keeps SQLite on the record's index: the seq index would walk every
    /// never-sent entry of a long queue.)
    package func rebase(_ record: RecordReference, on version: Int64) throws {
        try connection.run(
            """
            UPDATE outbox SET base_version = ?
            WHERE collection = ? AND record_uuid = ? AND +seq IS NULL AND op != 'create'
            """,
            [.integer(version), .text(record.collection), .text(record.uuid.wireText)])
    }

    /// For a record table's statements: nothing is queued for the record
    /// whose collection and uuid are the placeholders given.
    static func nothingQueued(collection: String, uuid: String) -> String {
        "NOT EXISTS (SELECT 1 FROM outbox WHERE collection = \(collection) AND record_uuid = \(uuid))"
    }

    /// For the doubtful creates' statements: every create queued and never
    /// sent, as a row of that table.
    static let unsentCreates = "SELECT DISTINCT collection, record_uuid, NULL FROM outbox WHERE op = 'create' AND seq IS NULL"

    /// For a record table's statements: the uuids of the records with
    /// entries queued in the collection bound as `?`.
    static let queuedInCollection = "SELECT record_uuid FROM outbox WHERE collection = ?"

    /// Every payload queued (attachments named by queued changes).
    func forEachPayload(_ body: (SQLiteRow) throws -> Void) throws {
        try connection.forEach("SELECT data FROM outbox WHERE data IS NOT NULL", [], body)
    }
}

/// The queue status's look-ups that must each stay on an index of their
/// own (`StorePlanTests` reads their plans).
package enum OutboxStatusQueries {
    /// Entries whose last send got no answer, but for `inFlight` (entry numbers, comma-separated).
    package static func checkingCount(notIn inFlight: String) -> String {
        "SELECT COUNT(*) FROM outbox WHERE unknown_outcome != 0 AND entry NOT IN (\(inFlight))"
    }

    /// Never-sent entries that name parents: the only ones a refused parent can hold.
    package static let heldCandidates = "seq IS NULL AND parents != ''"

    /// Entries refused at least `?` times (a budget of one or more): every
    /// cycle asks, so it is answered from the partial index of entries that
    /// failed at all, not by reading a long queue. (`failures > 0` lets
    /// SQLite see that the index holds every match.)
    package static let spentBudget = "failures > 0 AND failures >= ?"
}

/// Statements of the outbox that tests hold to their plans.
package enum OutboxSeqQueries {
    /// Gives never-sent entries their seqs in one statement: `?1` for the
    /// first entry of the JSON array `?2`, then one more for each after it.
    package static let numbering = """
        UPDATE outbox SET seq = ?1 + numbered.key FROM json_each(?2) AS numbered
        WHERE outbox.entry = numbered.value AND outbox.seq IS NULL
        """
}

/// Statements of settlement that tests hold to their plans.
package enum OutboxSettleQueries {
    /// Deletes the entries whose ids the JSON array ?1 lists, each by its key.
    package static let removing = "DELETE FROM outbox WHERE entry IN (SELECT value FROM json_each(?1))"
}
