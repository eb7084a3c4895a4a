import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// `GET /v1/ready`: a load balancer's question "may I send requests here?",
/// answered from the database itself, on both backends.
@Suite("Readiness", .timeLimit(.minutes(3)))
struct ReadinessTests {
    struct Ready: Decodable {
        var status: String
        var schemaVersion: Int

        enum CodingKeys: String, CodingKey {
            case status
            case schemaVersion = "schema_version"
        }
    }

    @Test(arguments: Backend.available)
    func aServerOnACurrentDatabaseIsReady(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        // No token and no app headers: probes come from load balancers.
        let answer = try await live.get("/v1/ready", token: nil)
        #expect(answer.status == 200, "\(answer.text)")
        let ready = try answer.decode(Ready.self)
        #expect(ready.status == "ready")
        #expect(ready.schemaVersion == ServerSchema.migrations(live.database.dialect).count)
        #expect(answer.headers["cache-control"] == "no-store")
        let posted = try await live.send("POST", "/v1/ready", token: nil, body: Data("{}".utf8))
        #expect(posted.status == 405)
    }

    @Test(arguments: Backend.available)
    func aDatabaseBehindOrContractedPastTheServerIsNotReady(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let expected = ServerSchema.migrations(live.database.dialect).count
        let required = ServerSchema.required(live.database.dialect)
        try live.database.write { try $0.execute("DELETE FROM schema_steps WHERE version >= ?", [.integer(Int64(required))]) }
        let behind = try await live.get("/v1/ready", token: nil)
        #expect(behind.status == 503)
        #expect(behind.error?.code == .unavailable)
        #expect(behind.error?.message.contains("has not been migrated yet") == true, "\(behind.text)")
        #expect(behind.headers["retry-after"] != nil)

        // A newer release's expand step: this server keeps serving beside it.
        try live.database.write { sql in
            for step in required...(expected + 1) { try sql.execute("INSERT INTO schema_steps (version) VALUES (?)", [.integer(Int64(step))]) }
        }
        let expanded = try await live.get("/v1/ready", token: nil)
        #expect(expanded.status == 200, "\(expanded.text)")
        let ready = try expanded.decode(Ready.self)
        #expect(ready.schemaVersion == expected + 1)

        // Its contract step: this server stops.
        try live.database.write { try $0.execute("INSERT INTO schema_migrations (version) VALUES (?)", [.integer(Int64(expected + 1))]) }
        let ahead = try await live.get("/v1/ready", token: nil)
        #expect(ahead.status == 503)
        #expect(ahead.error?.message.contains("a newer release contracted it") == true, "\(ahead.text)")
        // The process itself still answers.
        #expect(try await live.get("/v1/health", token: nil).status == 200)
    }

    /// PostgreSQL away (its pool closed here, as when the database server
    /// stops): 503 while the process itself answers. SQLite is a file the
    /// process opens itself; it has no such state.
    @Test(.enabled(if: Backend.postgresURL != nil, "needs the test PostgreSQL"))
    func aDatabaseThatDoesNotAnswerIsNotReady() async throws {
        let live = try LiveServer(.postgres)
        live.database.close()
        let answer = try await live.get("/v1/ready", token: nil)
        #expect(answer.status == 503)
        #expect(answer.error?.message.contains("The database does not answer") == true, "\(answer.text)")
        #expect(try await live.get("/v1/health", token: nil).status == 200)
    }
}
