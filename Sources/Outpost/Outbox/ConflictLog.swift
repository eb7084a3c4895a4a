import Foundation
import OutpostCore
import OutpostSQLite

/// The `conflicts` table: reports of edits that lost.
struct ConflictLog {
    let connection: SQLiteConnection
    let payloads: PayloadCodec

    /// Edits that lost to a newer server copy, kept so the app can offer
    /// to re-apply them.
    static func create(in connection: SQLiteConnection) throws {
        try connection.execute(
            """
            CREATE TABLE conflicts (
                id            INTEGER PRIMARY KEY AUTOINCREMENT,
                collection    TEXT NOT NULL,
                record_uuid   TEXT NOT NULL,
                mutation_id   TEXT NOT NULL,
                op            TEXT NOT NULL,
                local_change  TEXT,
                server_record TEXT,
                detected_at   TEXT NOT NULL
            );
            """)
    }

    /// The fields changed on both sides, for a conflict the server
    /// answered by field (a JSON array of names; NULL otherwise).
    /// Looks first: a release before named steps may have emptied the
    /// record of steps in a wipe, and the step then runs again.
    static func addFields(in connection: SQLiteConnection) throws {
        guard try !TableRebuild.columns(of: "conflicts", in: connection).contains("fields") else { return }
        try connection.execute("ALTER TABLE conflicts ADD COLUMN fields TEXT")
    }

    func all() throws -> [ConflictReport] {
        try reports(where: "1 = 1")
    }

    /// One report, or nil when there is none with that id.
    func report(_ id: Int64) throws -> ConflictReport? {
        try reports(where: "id = ?", [.integer(id)]).first
    }

    private func reports(where condition: String, _ arguments: [SQLiteValue] = []) throws -> [ConflictReport] {
        try connection.query(
            """
            SELECT id, collection, record_uuid, mutation_id, op, local_change, server_record, detected_at, fields
            FROM conflicts WHERE \(condition) ORDER BY id
            """, arguments
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
                detectedAt: ServerTimestamp(rawValue: row.string(7)).date,
                fields: try reader.reading("fields") { try Self.fields(row.optionalString(8)) })
        }
    }

    private static func fields(_ text: String?) throws -> [String] {
        guard let text else { return [] }
        guard case .array(let values) = try JSONValue.parse(text) else { return [] }
        return values.compactMap(\.stringValue)
    }

    /// Keeps a report (`localChange`, `serverRecord`: JSON texts, sealed
    /// here like every payload); returns its id.
    func insert(
        _ record: RecordReference, mutationID: UUID, op: MutationOp, localChange: String?, serverRecord: String?,
        detectedAt: ServerTimestamp, fields: [String]? = nil
    ) throws -> Int64 {
        try connection.run(
            """
            INSERT INTO conflicts (collection, record_uuid, mutation_id, op, local_change, server_record, detected_at, fields)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(record.collection), .text(record.uuid.wireText), .text(mutationID.wireText), .text(op.rawValue),
                try payloads.stored(localChange), try payloads.stored(serverRecord), .text(detectedAt.rawValue),
                .text(try fields.map { try JSONValue.array($0.map(JSONValue.string)).jsonText() }),
            ])
        return connection.lastInsertRowID
    }

    /// Every queued local change kept in a report (attachments they name are kept).
    func forEachLocalChange(_ body: (SQLiteRow) throws -> Void) throws {
        try connection.forEach("SELECT local_change FROM conflicts WHERE local_change IS NOT NULL", [], body)
    }

    func remove(_ id: Int64) throws {
        try Self.remove(id, in: connection)
    }

    /// For a caller inside a store transaction, which holds the connection only.
    static func remove(_ id: Int64, in connection: SQLiteConnection) throws {
        try connection.run("DELETE FROM conflicts WHERE id = ?", [.integer(id)])
    }

    /// The columns holding payloads, sealed like every other.
    static let payloadColumns = ["local_change", "server_record"]

    /// Reports whose `column` is still in clear text.
    func clearPayloads(_ column: String) throws -> [(key: SQLiteValue, text: String)] {
        try connection.query("SELECT id, \(column) FROM conflicts WHERE typeof(\(column)) = 'text'") { ($0.value(0), $0.string(1)) }
    }

    func setPayload(_ column: String, _ key: SQLiteValue, _ value: SQLiteValue) throws {
        try connection.run("UPDATE conflicts SET \(column) = ? WHERE id = ?", [value, key])
    }
}
