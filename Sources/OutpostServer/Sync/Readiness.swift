import Foundation
import OutpostCore

/// `GET /v1/ready`: whether this server can serve requests now, for a load
/// balancer or an orchestrator deciding where to send traffic. `/v1/health`
/// says the process answers; this also reads the database and checks that
/// this server may serve on its schema (the one it was built for, or a
/// newer one whose steps since are expand-only), and that a configured
/// JWKS gave at least one key.
extension SyncServer {
    struct Readiness: Encodable {
        var status = "ready"
        var serverTime: ServerTimestamp
        /// The database's schema: the highest migration step taken.
        var schemaVersion: Int
        /// The steps this server knows (below `schemaVersion` while a newer
        /// release's expand steps run beside it).
        var serverSchema: Int
        /// The oldest server schema that may still serve on this database.
        var oldestServerSchema: Int

        enum CodingKeys: String, CodingKey {
            case status
            case serverTime = "server_time"
            case schemaVersion = "schema_version"
            case serverSchema = "server_schema"
            case oldestServerSchema = "oldest_server_schema"
        }
    }

    func readiness() -> HTTPResponse {
        let known = ServerSchema.current(database.dialect)
        let state: SchemaState
        do {
            state = try database.read { try SchemaState.read($0) }
        } catch {
            return Self.errorResponse(
                APIError(.unavailable, "The database does not answer; this server cannot serve requests now.", retryAfter: 5),
                user: nil, cause: String(describing: error))
        }
        // A database ahead of this server by expand steps only is served:
        // during a rolling upgrade both releases take requests.
        if let refusal = state.refusal(known: known, required: ServerSchema.required(database.dialect)) {
            return Self.errorResponse(APIError(.unavailable, refusal, retryAfter: 30), user: nil)
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
            let body = try WireCoding.encode(
                Readiness(
                    serverTime: ServerTimestamp(clock.now()), schemaVersion: state.applied, serverSchema: known,
                    oldestServerSchema: state.oldestServer))
            return .json(200, Array(body))
        } catch {
            return Self.errorResponse(APIError.unavailable, user: nil, cause: String(describing: error))
        }
    }
}
