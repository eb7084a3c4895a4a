import Foundation
import OutpostCore
import OutpostSQLite

/// The `conflicts` table: reports of edits that lost.
struct ConflictLog {
    let connection: SQLiteConnection
    let payloads: PayloadCodec

    func all() throws -> [ConflictReport] {
        try connection.query(
            """
            SELECT id, collection, record_uuid, mutation_id, op, local_change, server_record, detected_at
            FROM conflicts ORDER BY id
            """
        ) { row in
            let reader = RowReader(table: "conflicts", key: "id \(row.int64(0))")
            return ConflictReport(
                id: row.int64(0),
                record: RecordReference(collection: row.string(1), uuid: try reader.uuid(row.string(2), "record uuid")),
                mutationID: try reader.uuid(row.string(3), "mutation id"),
                op: try reader.op(row.string(4)),
                localChange: try reader.reading("local change") { try payloads.text(row, 5).map { try JSONObject.parseObject($0) } },
                serverRecord: try reader.reading("server record") {
                    try payloads.text(row, 6).map { try WireCoding.decode(WireRecord.self, from: Data($0.utf8)) }
                },
                detectedAt: ServerTimestamp(rawValue: row.string(7)).date)
        }
    }

    func remove(_ id: Int64) throws {
        try connection.run("DELETE FROM conflicts WHERE id = ?", [.integer(id)])
    }
}
