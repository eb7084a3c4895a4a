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
    var doubts: DoubtfulCreateTable { DoubtfulCreateTable(connection: connection) }

    /// The record's queued create may already be on the server.
    func markMayBeOnServer(_ record: RecordReference) throws {
        try doubts.markMayBeOnServer(record)
    }

    /// True when the record's queued create may already be on the server
    /// (the mark is consumed: the caller queues a delete instead).
    func takeMayBeOnServer(_ record: RecordReference) throws -> Bool {
        try doubts.takeMayBeOnServer(record)
    }

    /// A never-sent create was cancelled by a local delete.
    func noteCancelledCreate(_ record: RecordReference) throws {
        try doubts.markCancelled(record, after: try lastSeq())
    }

    /// The server processed these seqs as new (any answer but `duplicate`):
    /// it had never seen them from this client. A create cancelled after seq
    /// `c` is forgiven when `c + 1` is among them: another copy of this
    /// database sending the create would have numbered it `c + 1` first. Only
    /// that seq proves it: a seq above it may be new while `c + 1` itself
    /// never reached the server (its entry refused whole and rejected here),
    /// and a `duplicate` proves nothing (a copy may have sent that very entry).
    func forgiveCancelledCreates(newSeqs: [Int64]) throws {
        try doubts.forgetCancelled(answeredNew: newSeqs)
    }

    /// Whether any create is in doubt at all (almost never: a restored
    /// backup, a copied profile, a damaged entry queued again).
    func hasDoubtfulCreates() throws -> Bool {
        try !doubts.isEmpty()
    }

    /// The record's create reached the server: nothing about it is in doubt.
    func forgetDoubt(_ record: RecordReference) throws {
        try doubts.forget(record)
    }

    /// This database is a copy (`409 client_behind`): the other timeline
    /// may have sent any create this one cancelled, so each becomes a delete
    /// the server applies or answers `not_found`; and any create still
    /// queued as never sent may be on the server already.
    func resolveDoubtsAfterClientBehind() throws {
        for doubt in try doubts.cancelled() {
            guard let uuid = UUID.fromWire(doubt.uuid) else { continue }
            try insert(RecordReference(collection: doubt.collection, uuid: uuid), op: .delete, baseVersion: nil, dataText: nil, parents: [])
        }
        try doubts.forgetAllCancelled()
        try doubts.markUnsentCreatesMayBeOnServer()
    }

    /// A pull brought back a record whose create this database cancelled:
    /// only a copy of this database could have sent it (the uuid was made
    /// here), and the person deleted it. It is hidden again and its delete
    /// queued. Returns how many came back.
    func redeleteReturnedRecords(in collection: String) throws -> Int {
        let returned = try doubts.cancelledAndPresent(in: collection)
        for text in returned {
            guard let uuid = UUID.fromWire(text) else { continue }
            let record = RecordReference(collection: collection, uuid: uuid)
            try RecordTable(collection, connection).hideAgain(text)
            try insert(record, op: .delete, baseVersion: nil, dataText: nil, parents: [])
            try forgetDoubt(record)
        }
        return returned.count
    }

    /// Whether any cancelled create is still in doubt (a pull then looks
    /// for such records coming back).
    func hasCancelledDoubts() throws -> Bool {
        try doubts.hasCancelled()
    }
}
