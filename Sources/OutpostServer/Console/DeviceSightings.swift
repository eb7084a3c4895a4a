import Foundation
import OutpostCore

/// When each device was last heard from, by any request that names it
/// (`Outpost-Device: <client id>`, sent by the library on every request).
/// A push records it in its own transaction; other requests only note it
/// here, and the notes are written together every few seconds by the
/// server's timer (and when the console's devices page asks), never on a
/// request's path.
final class DeviceSightings: Sendable {
    struct Sighting: Sendable {
        var at: String
        var schema: Int?
        var app: String?
    }

    private let seen = Locked<[String: Sighting]>([:])  // "user\nclient"

    /// The device a request names, when it is a client id.
    static func device(_ request: HTTPRequest) -> String? {
        guard let text = request.headers["outpost-device"], let id = UUID.fromWire(text.trimmingCharacters(in: .whitespaces))
        else { return nil }
        return id.wireText
    }

    func note(_ request: HTTPRequest, user: String, at now: ServerTimestamp) {
        guard let device = Self.device(request) else { return }
        let caller = CallerVersion(request)
        seen.withLock { $0[user + "\n" + device] = Sighting(at: now.rawValue, schema: caller.schema, app: caller.app) }
    }

    /// Writes what was noted since the last write, in one transaction.
    func write(to database: any ServerDatabase) throws {
        let taken = seen.withLock { seen -> [String: Sighting] in
            defer { seen = [:] }
            return seen
        }
        guard !taken.isEmpty else { return }
        do {
            try database.write { sql in
                for (key, sighting) in taken.sorted(by: { $0.key < $1.key }) {
                    let parts = key.split(separator: "\n", maxSplits: 1).map(String.init)
                    try sql.execute(
                        """
                        INSERT INTO client_versions (user_id, client_id, schema_version, app, seen_at) VALUES (?, ?, ?, ?, ?)
                        ON CONFLICT (user_id, client_id) DO UPDATE SET
                            schema_version = COALESCE(excluded.schema_version, client_versions.schema_version),
                            app = COALESCE(excluded.app, client_versions.app),
                            seen_at = CASE WHEN excluded.seen_at > client_versions.seen_at THEN excluded.seen_at
                                ELSE client_versions.seen_at END
                        """,
                        [
                            .text(parts[0]), .text(parts[1]), sighting.schema.map { .integer(Int64($0)) } ?? .null,
                            .text(sighting.app), .text(sighting.at),
                        ])
                }
            }
        } catch {
            // Kept for the next write: a busy database loses no sighting.
            seen.withLock { seen in seen.merge(taken) { newer, _ in newer } }
            throw error
        }
    }
}
