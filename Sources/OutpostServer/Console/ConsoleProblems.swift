import Foundation
import OutpostCore

/// The console's problems: changes the server refused (with the code, the
/// field errors and the data sent) and conflicts (both sides, and whose
/// version lost). A problem stays open until the same device writes that
/// record again: the person fixed or replaced the refused change.
enum ConsoleProblems {
    /// Whether the problem `p` is still open: that device has not written the record since.
    static let isOpen = """
        NOT EXISTS (SELECT 1 FROM record_history h WHERE h.collection = p.collection AND h.uuid = p.uuid
            AND h.client_id = p.client_id AND h.at > p.at)
        """

    static let columns = """
        p.id, p.kind, p.at, p.user_id, p.client_id, p.mutation_id, p.seq, p.collection, p.uuid, p.op, p.code, p.errors,
        p.sent, p.base_version, p.server_version, p.server_data, p.lost, \(isOpen)
        """

    /// Problems matching `condition` (over columns of `push_problems`), newest first.
    static func rows(where condition: String, _ arguments: [SQLValue], limit: Int, _ sql: any SQLExecutor) throws -> [JSONValue] {
        try sql.query(
            "SELECT \(columns) FROM push_problems p WHERE \(condition) ORDER BY p.id DESC LIMIT ?",
            arguments + [.integer(Int64(limit))]
        ).map { row in
            [
                "id": .int(row.int(0)), "kind": .string(row.string(1)), "at": .string(row.string(2)),
                "user": .string(row.string(3)), "client": .string(row.string(4)), "mutation_id": .string(row.string(5)),
                "seq": .int(row.int(6)), "collection": .string(row.string(7)), "uuid": .string(row.string(8)),
                "op": .string(row.string(9)), "code": .text(row.optionalString(10)), "errors": .stored(row.optionalString(11)),
                "sent": .stored(row.optionalString(12)), "base_version": .number(row.optionalInt(13)),
                "server_version": .number(row.optionalInt(14)), "server_data": .stored(row.optionalString(15)),
                "lost": .string(row.string(16)), "open": .bool(row.bool(17)),
            ]
        }
    }

    /// `GET /admin/api/problems`: filtered by kind, user, client, collection, code, and open only.
    static func list(_ query: [String: String], database: any ServerDatabase) throws -> JSONValue {
        var conditions: [String] = []
        var arguments: [SQLValue] = []
        if let kind = query["kind"], !kind.isEmpty {
            guard ["rejected", "conflict"].contains(kind) else {
                throw APIError(.invalidRequest, "Show rejected changes or conflicts.", fields: ["kind": "must be rejected or conflict"])
            }
            conditions.append("p.kind = ?")
            arguments.append(.text(kind))
        }
        for (name, column) in [("user", "p.user_id"), ("client", "p.client_id"), ("collection", "p.collection"), ("code", "p.code")] {
            guard let value = query[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { continue }
            guard value.utf8.count <= 200 else {
                throw APIError(.invalidRequest, "Filters are at most 200 bytes.", fields: [name: "too long"])
            }
            conditions.append("\(column) = ?")
            arguments.append(.text(value))
        }
        if let open = query["open"], !open.isEmpty {
            guard ["1", "0"].contains(open) else {
                throw APIError(.invalidRequest, "open is 1 (open problems only) or 0.", fields: ["open": "must be 1 or 0"])
            }
            if open == "1" { conditions.append(isOpen) }
        }
        let condition = conditions.isEmpty ? "1 = 1" : conditions.joined(separator: " AND ")
        let found = try database.read { sql in try rows(where: condition, arguments, limit: 200, sql) }
        return ["problems": .array(found)]
    }
}
