import Foundation
import OutpostCore

/// Changes the server refused or that met a conflict, kept for the
/// administrator's console with what the device sent and what the server
/// held: the server's answer alone tells the device, not the people who
/// run the server. Removed after the push results' retention.
enum PushProblems {
    /// Whose version was kept out of the record.
    enum Loser: String {
        /// The device's change was not applied (refused, or the server's copy won).
        case device
        /// The device's change replaced a version it had not seen (last write wins).
        case server
        /// Nothing was lost: the change was refused for what it said.
        case none
    }

    /// Keeps the problem `result` shows, if any. `overwritten`: the server's
    /// copy a last-write-wins change replaced without having seen it.
    static func keep(
        _ result: PushOutcome, of mutation: Mutation, overwritten: ServerRecord?, user: String, client: String,
        now: ServerTimestamp, in sql: any SQLExecutor
    ) throws {
        let kind: String
        let lost: Loser
        var server: (version: Int64, data: String?)?
        switch result.status {
        case .rejected, .forbidden, .notFound:
            kind = "rejected"
            lost = .none
        case .conflict:
            kind = "conflict"
            lost = .device
            server = result.record.map { ($0.version, $0.deleted ? nil : $0.dataText) }
        case .applied where overwritten != nil:
            kind = "conflict"
            lost = .server
            server = overwritten.map { ($0.version, $0.dataText) }
        default:
            return
        }
        let errors = try result.errors.map { errors in
            try JSONObject(uniqueKeysWithValues: errors.map { ($0.key, JSONValue.string($0.value)) }).jsonText()
        }
        try sql.execute(
            """
            INSERT INTO push_problems (kind, at, user_id, client_id, mutation_id, seq, collection, uuid, op, code, errors,
                sent, base_version, server_version, server_data, lost)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(kind), .text(now.rawValue), .text(user), .text(client), .text(mutation.id.wireText),
                .integer(mutation.seq), .text(mutation.collection), .text(mutation.uuid.wireText),
                .text(mutation.op.rawValue), .text(result.code ?? (result.status == .conflict ? "conflict" : nil)),
                .text(errors), .text(try mutation.data?.jsonText()), .integer(mutation.baseVersion),
                .integer(server?.version), .text(server?.data ?? nil), .text(lost.rawValue),
            ])
    }
}
