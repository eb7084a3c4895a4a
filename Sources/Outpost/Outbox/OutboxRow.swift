import Foundation
import OutpostCore
import OutpostSQLite

/// An outbox row as read from SQLite, with its payload still as text so that
/// scanning a long queue does not parse every payload.
struct OutboxRow {
    var entry: Int64
    var mutationID: UUID
    var record: RecordReference
    var op: MutationOp
    var baseVersion: Int64?
    /// Checked when read (a row whose data is not one JSON object is
    /// damaged), parsed only by `data()`.
    var dataText: String?
    var parentsText: String
    var seq: Int64?
    var attempts: Int
    var failures: Int
    var lastError: String?
    /// The device clock's time of the change (`queued_at`).
    var queuedAt: String

    static let columns =
        "entry, mutation_id, collection, record_uuid, op, base_version, data, parents, seq, attempts, failures, last_error, queued_at"

    init(_ row: SQLiteRow, payloads: PayloadCodec) throws {
        entry = row.int64(0)
        let reader = RowReader(table: "outbox", key: "entry \(entry)")
        mutationID = try reader.uuid(row.string(1), "mutation id")
        record = RecordReference(collection: row.string(2), uuid: try reader.uuid(row.string(3), "record uuid"))
        op = try reader.op(row.string(4))
        baseVersion = row.optionalInt64(5)
        dataText = try reader.reading("data") { try payloads.text(row, 6) }
        if let dataText { try reader.checkObject(dataText, "data") }
        if op != .delete && dataText == nil { throw reader.damaged("a \(op.rawValue) without data") }
        parentsText = row.string(7)
        seq = row.optionalInt64(8)
        attempts = Int(row.int64(9))
        failures = Int(row.int64(10))
        lastError = row.optionalString(11)
        queuedAt = row.string(12)
    }

    /// About what this entry adds to a push body: its data plus the
    /// envelope (seq, ids, op, collection, base version).
    var wireSizeEstimate: Int { (dataText?.utf8.count ?? 0) + 200 + record.collection.utf8.count }

    var parents: [RecordReference] {
        parentsText.split(separator: " ").compactMap(RecordReference.init(text:))
    }

    func data() throws -> JSONObject? {
        try dataText.map { try RowReader(table: "outbox", key: "entry \(entry)").object($0, "data") }
    }

    func entryValue() -> OutboxEntry {
        OutboxEntry(
            entry: entry, mutationID: mutationID, record: record, op: op, baseVersion: baseVersion, dataText: dataText,
            parents: parents, seq: seq, attempts: attempts, failures: failures, lastError: lastError,
            deviceTime: ServerTimestamp(rawValue: queuedAt).date == nil ? nil : ServerTimestamp(rawValue: queuedAt))
    }

    static func parentsText(_ parents: Set<RecordReference>) -> String {
        parents.map(\.description).sorted().joined(separator: " ")
    }
}
