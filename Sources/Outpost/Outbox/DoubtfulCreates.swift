import Foundation
import OutpostCore
import OutpostSQLite

/// Creates whose fate on the server this database cannot know.
///
/// A create the outbox never sent is normally cancelled by a local delete:
/// the server never saw the record. Two things break "never sent":
/// - A backup put back (or a copied profile) holds creates as unsent that
///   the timeline it replaced did send. The database cannot tell until the
///   server answers `409 client_behind`, or sends such a record back.
/// - A sent create whose stored entry was damaged is queued again from the
///   record row as a new, never-sent create; the first one may have arrived.
///
/// So `doubtful_creates` keeps, per record, either the seq handed out when
/// its create was cancelled (`cancelled_after_seq`: the server may hold it
/// if this database is a copy), or NULL (its queued create may be a resend:
/// a local delete must reach the server). A cancelled create is forgiven
/// when the server processes a seq above that number as new: another
/// timeline sending anything would have used those seqs first.
extension Outbox {
    /// The record's queued create may already be on the server.
    func markMayBeOnServer(_ record: RecordReference) throws {
        try connection.run(
            """
            INSERT INTO doubtful_creates (collection, record_uuid, cancelled_after_seq) VALUES (?, ?, NULL)
            ON CONFLICT (collection, record_uuid) DO UPDATE SET cancelled_after_seq = NULL
            """, [.text(record.collection), .text(record.uuid.wireText)])
    }

    /// True when the record's queued create may already be on the server
    /// (the mark is consumed: the caller queues a delete instead).
    func takeMayBeOnServer(_ record: RecordReference) throws -> Bool {
        try connection.run(
            "DELETE FROM doubtful_creates WHERE collection = ? AND record_uuid = ? AND cancelled_after_seq IS NULL",
            [.text(record.collection), .text(record.uuid.wireText)]) > 0
    }

    /// A never-sent create was cancelled by a local delete.
    func noteCancelledCreate(_ record: RecordReference) throws {
        try connection.run(
            """
            INSERT INTO doubtful_creates (collection, record_uuid, cancelled_after_seq) VALUES (?, ?, ?)
            ON CONFLICT (collection, record_uuid) DO UPDATE SET cancelled_after_seq = excluded.cancelled_after_seq
            """, [.text(record.collection), .text(record.uuid.wireText), .integer(try lastSeq())])
    }

    /// The server processed these seqs as new (any answer but `duplicate`):
    /// it had never seen them from this client, so no other copy of this
    /// database sent anything numbered from there on, and creates cancelled
    /// before the highest were never sent by anyone. (A `duplicate` proves
    /// nothing: a copy may have sent that very entry, and the create beside it.)
    func forgiveCancelledCreates(newSeqs: [Int64]) throws {
        guard let highest = newSeqs.max() else { return }
        try connection.run(
            "DELETE FROM doubtful_creates WHERE cancelled_after_seq IS NOT NULL AND cancelled_after_seq < ?",
            [.integer(highest)])
    }

    /// Whether any create is in doubt at all (almost never: a restored
    /// backup, a copied profile, a damaged entry queued again).
    func hasDoubtfulCreates() throws -> Bool {
        try connection.query("SELECT EXISTS (SELECT 1 FROM doubtful_creates)") { $0.int64(0) }.first == 1
    }

    /// The record's create reached the server: nothing about it is in doubt.
    func forgetDoubt(_ record: RecordReference) throws {
        try connection.run(
            "DELETE FROM doubtful_creates WHERE collection = ? AND record_uuid = ?",
            [.text(record.collection), .text(record.uuid.wireText)])
    }

    /// This database is a copy (`409 client_behind`): the other timeline
    /// may have sent any create this one cancelled, so each becomes a delete
    /// the server applies or answers `not_found`; and any create still
    /// queued as never sent may be on the server already.
    func resolveDoubtsAfterClientBehind() throws {
        let cancelled = try connection.query(
            "SELECT collection, record_uuid FROM doubtful_creates WHERE cancelled_after_seq IS NOT NULL"
        ) { (collection: $0.string(0), uuid: $0.string(1)) }
        for doubt in cancelled {
            guard let uuid = UUID.fromWire(doubt.uuid) else { continue }
            try insert(RecordReference(collection: doubt.collection, uuid: uuid), op: .delete, baseVersion: nil, dataText: nil, parents: [])
        }
        try connection.run("DELETE FROM doubtful_creates WHERE cancelled_after_seq IS NOT NULL")
        try connection.run(
            """
            INSERT INTO doubtful_creates (collection, record_uuid, cancelled_after_seq)
            SELECT DISTINCT collection, record_uuid, NULL FROM outbox WHERE op = 'create' AND seq IS NULL
            ON CONFLICT (collection, record_uuid) DO UPDATE SET cancelled_after_seq = NULL
            """)
    }

    /// A pull brought back a record whose create this database cancelled:
    /// only a copy of this database could have sent it (the uuid was made
    /// here), and the person deleted it. It is hidden again and its delete
    /// queued. Returns how many came back.
    func redeleteReturnedRecords(in collection: String) throws -> Int {
        let returned = try connection.query(
            """
            SELECT d.record_uuid FROM doubtful_creates d JOIN "\(collection)" t ON t.uuid = d.record_uuid
            WHERE d.collection = ? AND d.cancelled_after_seq IS NOT NULL AND t.deleted = 0
            """, [.text(collection)]
        ) { $0.string(0) }
        for text in returned {
            guard let uuid = UUID.fromWire(text) else { continue }
            let record = RecordReference(collection: collection, uuid: uuid)
            try connection.run(
                "UPDATE \"\(collection)\" SET deleted = 1, sync_state = 'pending' WHERE uuid = ?", [.text(text)])
            try insert(record, op: .delete, baseVersion: nil, dataText: nil, parents: [])
            try forgetDoubt(record)
        }
        return returned.count
    }

    /// Whether any cancelled create is still in doubt (a pull then looks
    /// for such records coming back).
    func hasCancelledDoubts() throws -> Bool {
        try connection.first("SELECT 1 FROM doubtful_creates WHERE cancelled_after_seq IS NOT NULL LIMIT 1") { _ in true } ?? false
    }
}
