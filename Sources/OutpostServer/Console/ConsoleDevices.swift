import Foundation
import OutpostCore

/// The console's devices: every (user, client) the server has heard from,
/// when, at which change number, with which app and schema, its open
/// problems, whether it is connected now, and what keeps it from syncing.
struct ConsoleDevices {
    let database: any ServerDatabase
    let config: ServerConfig
    /// Who is connected to this server now (user, device).
    let connected: [(user: String, device: String?)]
    let now: Date

    func list(_ query: [String: String]) throws -> JSONValue {
        let sort = query["sort"] ?? "silent"
        guard ["silent", "recent"].contains(sort) else {
            throw APIError(.invalidRequest, "Sort by silent (longest silent first) or recent.", fields: ["sort": "must be silent or recent"])
        }
        var arguments: [SQLValue] = []
        var condition = "1 = 1"
        if let user = query["user"]?.trimmingCharacters(in: .whitespaces), !user.isEmpty {
            guard user.utf8.count <= 200 else {
                throw APIError(.invalidRequest, "A user name is at most 200 bytes.", fields: ["user": "too long"])
            }
            condition = "v.user_id = ?"
            arguments.append(.text(user))
        }
        let open = ConsoleProblems.isOpen
        let rows = try database.read { sql in
            try sql.query(
                """
                SELECT v.user_id, v.client_id, v.seen_at, v.app, v.schema_version, s.last_seq, s.updated_at,
                    (SELECT COUNT(*) FROM push_problems p WHERE p.user_id = v.user_id AND p.client_id = v.client_id
                        AND p.kind = 'rejected' AND \(open)),
                    (SELECT COUNT(*) FROM push_problems p WHERE p.user_id = v.user_id AND p.client_id = v.client_id
                        AND p.kind = 'conflict' AND \(open)),
                    EXISTS (SELECT 1 FROM tokens t WHERE t.user_id = v.user_id),
                    EXISTS (SELECT 1 FROM tokens t WHERE t.user_id = v.user_id AND t.revoked_at IS NULL
                        AND (t.expires_at IS NULL OR t.expires_at > ?))
                FROM client_versions v
                LEFT JOIN client_seqs s ON s.user_id = v.user_id AND s.client_id = v.client_id
                WHERE \(condition)
                ORDER BY v.seen_at \(sort == "silent" ? "ASC" : "DESC"), v.user_id, v.client_id LIMIT 500
                """, [.text(ServerTimestamp(now).rawValue)] + arguments)
        }
        let liveDevices = Set(connected.compactMap { entry in entry.device.map { entry.user + "\n" + $0 } })
        // A connection that named no device (an older app) shows its user as live.
        let liveUsers = Set(connected.filter { $0.device == nil }.map(\.user))
        let devices = rows.map { row -> JSONValue in
            let user = row.string(0)
            let client = row.string(1)
            let schema = row.optionalInt(4)
            var blocking: [JSONValue] = []
            if let minimum = config.minSchema, (schema ?? 0) < minimum {
                blocking.append(["code": "schema_too_old", "schema": .number(schema), "minimum": .int(Int64(minimum))])
            }
            if row.bool(9), !row.bool(10) { blocking.append(["code": "no_valid_token"]) }
            if row.int(7) > 0 { blocking.append(["code": "rejected_changes", "count": .int(row.int(7))]) }
            if row.int(8) > 0 { blocking.append(["code": "conflicts", "count": .int(row.int(8))]) }
            let live: String
            if liveDevices.contains(user + "\n" + client) {
                live = "device"
            } else if liveUsers.contains(user) {
                live = "user"
            } else {
                live = "no"
            }
            return [
                "user": .string(user), "client": .string(client), "last_seen": .string(row.string(2)),
                "app": .text(row.optionalString(3)), "schema": .number(schema), "last_seq": .number(row.optionalInt(5)),
                "last_push": .text(row.optionalString(6)), "open_rejections": .int(row.int(7)),
                "open_conflicts": .int(row.int(8)), "live": .string(live), "blocking": .array(blocking),
            ]
        }
        return ["devices": .array(devices), "sort": .string(sort)]
    }
}
