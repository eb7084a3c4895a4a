import Foundation
import OutpostCore

/// `GET /v1/ready`: whether this server can serve requests now, for a load
/// balancer or an orchestrator deciding where to send traffic. `/v1/health`
/// says the process answers; this also reads the database and checks that
/// its schema is the one this server was built for, and that a configured
/// JWKS gave at least one key.
extension SyncServer {
    struct Readiness: Encodable {
        var status = "ready"
        var serverTime: ServerTimestamp
        var schemaVersion: Int

        enum CodingKeys: String, CodingKey {
            case status
            case serverTime = "server_time"
            case schemaVersion = "schema_version"
        }
    }

    func readiness() -> HTTPResponse {
        let expected = ServerSchema.migrations(database.dialect).count
        let applied: Int
        do {
            applied = Int(try database.read { sql in
                try sql.first("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")?.int(0) ?? 0
            })
        } catch {
            return Self.errorResponse(
                APIError(.unavailable, "The database does not answer; this server cannot serve requests now.", retryAfter: 5),
                user: nil, cause: String(describing: error))
        }
        guard applied == expected else {
            let fix = applied < expected
                ? "it has not been migrated yet (outpost serve migrates it when it starts)"
                : "a newer outpost serve migrated it; run that version here too"
            return Self.errorResponse(
                APIError(
                    .unavailable,
                    "The database's schema is at version \(applied), this server needs \(expected): \(fix).",
                    retryAfter: 30),
                user: nil)
        }
        if let jwt = tokens.jwt, !jwt.hasUsableKeys() {
            // Every JWT would get 401 "sign in again": the devices of a fleet
            // would all stop syncing behind a load balancer that thought this
            // server healthy.
            return Self.errorResponse(
                APIError(
                    .unavailable,
                    "The JWKS at \(jwt.settings.jwks) gave no usable key, so every JWT would be refused: check the path or "
                        + "URL and that the identity provider answers (SIGHUP reads it again).",
                    retryAfter: 30),
                user: nil)
        }
        do {
            let body = try WireCoding.encode(Readiness(serverTime: ServerTimestamp(clock.now()), schemaVersion: applied))
            return .json(200, Array(body))
        } catch {
            return Self.errorResponse(APIError.unavailable, user: nil, cause: String(describing: error))
        }
    }
}
