import Foundation
import OutpostCore

/// Every version a record has had, written in the transaction that makes
/// it: what the administrator's console shows as the record's history.
/// Removed with the record when its tombstone passes the horizon.
enum RecordHistory {
    enum Operation: String {
        case create, update, delete, assign
    }

    /// Keeps `record` as it stands after `op`, written by `user` from `client`.
    static func keep(
        _ record: ServerRecord, op: Operation, user: String, client: String, in sql: any SQLExecutor
    ) throws {
        try sql.execute(
            """
            INSERT INTO record_history (collection, uuid, version, op, at, user_id, client_id, device_time, owner, team, data)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(record.collection), .text(record.uuid), .integer(record.version), .text(op.rawValue),
                .text(record.updatedAt), .text(user), .text(client), .text(op == .assign ? nil : record.deviceTime),
                .text(record.owner), .text(record.team), .text(record.deleted ? nil : record.dataText),
            ])
    }
}
