import Foundation
import OutpostCore

/// Every version a record has had, written in the transaction that makes
/// it: what the administrator's console shows as the record's history.
/// Removed with the record when its tombstone passes the horizon.
///
/// The newest version is the record's own row, so its history row keeps no
/// second copy of the data: when a newer version comes, the row of the one
/// it replaces is given the data it had. Most records are written once, so
/// most of the data a push writes is written once (a create's history row
/// with its data took a tenth of a push's server time).
enum RecordHistory {
    enum Operation: String {
        case create, update, delete, assign
    }

    /// Keeps `record` as it stands after `op`, written by `user` from
    /// `client`; `previous` is the record as it stood before (nil for a create).
    static func keep(
        _ record: ServerRecord, op: Operation, replacing previous: ServerRecord?, user: String, client: String,
        in sql: any SQLExecutor
    ) throws {
        if let previous, !previous.deleted, let data = previous.dataText {
            try sql.execute(
                "UPDATE record_history SET data = ? WHERE collection = ? AND uuid = ? AND version = ? AND data IS NULL",
                [.text(data), .text(previous.collection), .text(previous.uuid), .integer(previous.version)])
        }
        try sql.execute(
            """
            INSERT INTO record_history (collection, uuid, version, op, at, user_id, client_id, device_time, owner, team, data)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)
            """,
            [
                .text(record.collection), .text(record.uuid), .integer(record.version), .text(op.rawValue),
                .text(record.updatedAt), .text(user), .text(client), .text(op == .assign ? nil : record.deviceTime),
                .text(record.owner), .text(record.team),
            ])
    }

    /// A history row's data: its own, or, for the record's newest version,
    /// the record's (see above). A tombstone's is nil.
    static func data(stored: String?, version: Int64, of record: ServerRecord) -> String? {
        stored ?? (version == record.version && !record.deleted ? record.dataText : nil)
    }
}
