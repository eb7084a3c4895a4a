import Foundation
import OutpostSQLite

/// The `outbox` table: changes waiting for the server, in the order they
/// were made (`Outbox` decides what goes in and out; the SQL is here).
struct OutboxTable {
    let connection: SQLiteConnection

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

    static func create(in connection: SQLiteConnection) throws {
        try connection.execute(definition)
        for index in baseIndexes { try connection.execute(index) }
    }

    static func createSummaryIndexes(in connection: SQLiteConnection) throws {
        for index in summaryIndexes { try connection.execute(index) }
    }

    static func createFailingIndex(in connection: SQLiteConnection) throws {
        try connection.execute(failingIndex)
    }

    /// Stores made before the quick check hold `op IN (…)`: the table is
    /// made again from `definition`, every entry kept with its number. Runs
    /// before the later indexes are added, so only the base ones are made again.
    static func rebuildLegacyChecks(in connection: SQLiteConnection) throws {
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
