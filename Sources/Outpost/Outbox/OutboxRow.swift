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
    var dataText: String?
    var parentsText: String
    var seq: Int64?
    var attempts: Int
    var failures: Int
    var lastError: String?

    static let columns =
        "entry, mutation_id, collection, record_uuid, op, base_version, data, parents, seq, attempts, failures, last_error"

    init(_ row: SQLiteRow, payloads: PayloadCodec) throws {
        entry = row.int64(0)
        mutationID = UUID.fromWire(row.string(1)) ?? UUID()
        record = RecordReference(collection: row.string(2), uuid: UUID.fromWire(row.string(3)) ?? UUID())
        op = MutationOp(rawValue: row.string(4)) ?? .update
        baseVersion = row.optionalInt64(5)
        dataText = try payloads.text(row, 6)
        parentsText = row.string(7)
        seq = row.optionalInt64(8)
        attempts = Int(row.int64(9))
        failures = Int(row.int64(10))
        lastError = row.optionalString(11)
    }

    /// About what this entry adds to a push body: its data plus the
    /// envelope (seq, ids, op, collection, base version).
    var wireSizeEstimate: Int { (dataText?.utf8.count ?? 0) + 200 + record.collection.utf8.count }

    var parents: [RecordReference] {
        parentsText.split(separator: " ").compactMap(RecordReference.init(text:))
    }

    func data() throws -> JSONObject? {
        try dataText.map { try JSONObject.parseObject($0) }
    }

    func entryValue() throws -> OutboxEntry {
        OutboxEntry(
            entry: entry, mutationID: mutationID, record: record, op: op, baseVersion: baseVersion, data: try data(),
            parents: parents, seq: seq, attempts: attempts, failures: failures, lastError: lastError)
    }

    static func parentsText(_ parents: Set<RecordReference>) -> String {
        parents.map(\.description).sorted().joined(separator: " ")
    }
}
