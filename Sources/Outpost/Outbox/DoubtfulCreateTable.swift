import Foundation
import OutpostCore
package import OutpostSQLite

/// The `doubtful_creates` table: creates whose fate on the server this
/// database cannot know (see `DoubtfulCreates.swift` for what each row means).
package struct DoubtfulCreateTable {
    let connection: SQLiteConnection

    package init(connection: SQLiteConnection) { self.connection = connection }

    package static func create(in connection: SQLiteConnection) throws {
        try connection.execute(
            """
            CREATE TABLE doubtful_creates (
                collection          TEXT NOT NULL,
                record_uuid         TEXT NOT NULL,
                cancelled_after_seq INTEGER,
                PRIMARY KEY (collection, record_uuid)
            ) WITHOUT ROWID;
            """)
    }

    /// A pull shows the server holds a record whose create is queued and
    /// never sent (`?1` collection, `?2` uuid): that create may be on the
    /// server already. Prepared once per page by `SyncedCopyWriter`.
    static let markUnsentCreateMayBeOnServer = """
        INSERT INTO doubtful_creates (collection, record_uuid, cancelled_after_seq)
        SELECT collection, record_uuid, NULL FROM outbox
        WHERE collection = ?1 AND record_uuid = ?2 AND op = 'create' AND seq IS NULL LIMIT 1
        ON CONFLICT (collection, record_uuid) DO UPDATE SET cancelled_after_seq = NULL
        """

    /// The record's create may be on the server (a cancelled mark becomes this one).
    package func markMayBeOnServer(_ record: RecordReference) throws {
        try connection.run(
            """
            INSERT INTO doubtful_creates (collection, record_uuid, cancelled_after_seq) VALUES (?, ?, NULL)
            ON CONFLICT (collection, record_uuid) DO UPDATE SET cancelled_after_seq = NULL
            """, [.text(record.collection), .text(record.uuid.wireText)])
    }

    /// Removes the record's "may be on the server" mark; true when there was one.
    package func takeMayBeOnServer(_ record: RecordReference) throws -> Bool {
        try connection.run(
            "DELETE FROM doubtful_creates WHERE collection = ? AND record_uuid = ? AND cancelled_after_seq IS NULL",
            [.text(record.collection), .text(record.uuid.wireText)]) > 0
    }

    /// The record's never-sent create was cancelled when `lastSeq` was the last seq handed out.
    package func markCancelled(_ record: RecordReference, after lastSeq: Int64) throws {
        try connection.run(
            """
            INSERT INTO doubtful_creates (collection, record_uuid, cancelled_after_seq) VALUES (?, ?, ?)
            ON CONFLICT (collection, record_uuid) DO UPDATE SET cancelled_after_seq = excluded.cancelled_after_seq
            """, [.text(record.collection), .text(record.uuid.wireText), .integer(lastSeq)])
    }

    /// Forgets creates cancelled before `seq`.
    /// Forgets the cancelled creates whose next seq (`cancelled_after_seq + 1`)
    /// is one of `seqs`, the seqs the server processed as new.
    package func forgetCancelled(answeredNew seqs: [Int64]) throws {
        guard !seqs.isEmpty else { return }
        try connection.run(
            "DELETE FROM doubtful_creates WHERE cancelled_after_seq IS NOT NULL AND cancelled_after_seq + 1 IN ("
                + Array(repeating: "?", count: seqs.count).joined(separator: ", ") + ")",
            seqs.map { .integer($0) })
    }

    package func isEmpty() throws -> Bool {
        try connection.query("SELECT EXISTS (SELECT 1 FROM doubtful_creates)") { $0.int64(0) }.first != 1
    }

    func forget(_ record: RecordReference) throws {
        try connection.run(
            "DELETE FROM doubtful_creates WHERE collection = ? AND record_uuid = ?",
            [.text(record.collection), .text(record.uuid.wireText)])
    }

    /// The cancelled creates, as stored (collection, uuid text).
    package func cancelled() throws -> [(collection: String, uuid: String)] {
        try connection.query("SELECT collection, record_uuid FROM doubtful_creates WHERE cancelled_after_seq IS NOT NULL") {
            (collection: $0.string(0), uuid: $0.string(1))
        }
    }

    package func forgetAllCancelled() throws {
        try connection.run("DELETE FROM doubtful_creates WHERE cancelled_after_seq IS NOT NULL")
    }

    /// Every create queued and never sent may be on the server.
    package func markUnsentCreatesMayBeOnServer() throws {
        try connection.run(
            """
            INSERT INTO doubtful_creates (collection, record_uuid, cancelled_after_seq)
            \(OutboxTable.unsentCreates)
            ON CONFLICT (collection, record_uuid) DO UPDATE SET cancelled_after_seq = NULL
            """)
    }

    /// Cancelled creates of `collection` whose record is there and not deleted (uuid texts).
    func cancelledAndPresent(in collection: String) throws -> [String] {
        try connection.query(
            """
            SELECT d.record_uuid FROM doubtful_creates d JOIN "\(collection)" t ON t.uuid = d.record_uuid
            WHERE d.collection = ? AND d.cancelled_after_seq IS NOT NULL AND t.deleted = 0
            """, [.text(collection)]
        ) { $0.string(0) }
    }

    func hasCancelled() throws -> Bool {
        try connection.first("SELECT 1 FROM doubtful_creates WHERE cancelled_after_seq IS NOT NULL LIMIT 1") { _ in true } ?? false
    }
}
