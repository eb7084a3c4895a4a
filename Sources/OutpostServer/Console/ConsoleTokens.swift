import Foundation
import OutpostCore

/// The console's tokens: issue (shown once), list, revoke. A token is
/// named by its stored hash, which cannot be used to sign in.
struct ConsoleTokens {
    let tokens: TokenStore
    let database: any ServerDatabase
    let clock: any WallClock

    struct Issue: Decodable {
        var user: String
        var role: String
        var team: String
        var ttlSeconds: Int?

        enum CodingKeys: String, CodingKey {
            case user, role, team
            case ttlSeconds = "ttl_seconds"
        }
    }

    func list(_ query: [String: String]) throws -> JSONValue {
        var arguments: [SQLValue] = []
        var condition = "1 = 1"
        if let user = query["user"]?.trimmingCharacters(in: .whitespaces), !user.isEmpty {
            condition = "user_id = ?"
            arguments.append(.text(String(user.prefix(200))))
        }
        let rows = try database.read { sql in
            try sql.query(
                """
                SELECT hash, user_id, role, team, created_at, expires_at, revoked_at FROM tokens WHERE \(condition)
                ORDER BY created_at DESC, hash LIMIT 500
                """, arguments)
        }
        let now = ServerTimestamp(clock.now()).rawValue
        return [
            "tokens": .array(rows.map { row in
                let state: String
                if row.optionalString(6) != nil {
                    state = "revoked"
                } else if let expires = row.optionalString(5), expires <= now {
                    state = "expired"
                } else {
                    state = "active"
                }
                return [
                    "id": .string(row.string(0)), "user": .string(row.string(1)), "role": .string(row.string(2)),
                    "team": .string(row.string(3)), "created_at": .string(row.string(4)),
                    "expires_at": .text(row.optionalString(5)), "revoked_at": .text(row.optionalString(6)),
                    "state": .string(state),
                ]
            })
        ]
    }

    func issue(_ request: Issue) throws -> JSONValue {
        let printable = TokenStore.isPrintableName
        var fields: [String: String] = [:]
        if !printable(request.user) { fields["user"] = "must be printable text of 1 to 200 bytes" }
        if !printable(request.team) { fields["team"] = "must be printable text of 1 to 200 bytes" }
        let role = Role(rawValue: request.role)
        if role == nil { fields["role"] = "must be field, coordinator or admin" }
        if let ttl = request.ttlSeconds, !(60...(10 * 365 * 86_400)).contains(ttl) {
            fields["ttl_seconds"] = "must be from 60 seconds to 10 years"
        }
        guard fields.isEmpty, let role else {
            throw APIError(.invalidRequest, "The token could not be issued: check the fields.", fields: fields)
        }
        let token = try tokens.issue(
            user: request.user, role: role, team: request.team, ttl: request.ttlSeconds.map(TimeInterval.init))
        return ["token": .string(token), "id": .string(SHA256.hex(of: token.utf8))]
    }

    /// Revokes the token with this hash; its live streams end within a second.
    func revoke(id: String) throws -> JSONValue {
        // A token's id is the SHA-256 of it, written as a blob name is.
        guard AttachedFile.isBlobName(id) else {
            throw APIError(.invalidRequest, "A token id is its 64-character hash.", fields: ["id": "must be 64 hex digits"])
        }
        guard try tokens.revoke(hash: id) else {
            throw APIError(.notFound, "No active token has this id: it does not exist or is already revoked.")
        }
        return ["revoked": .bool(true), "id": .string(id)]
    }
}
