import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// `outpost migrate`, run as an operator runs it during a rolling upgrade.
@Suite("outpost migrate", .timeLimit(.minutes(3)))
struct MigrateCommandTests {
    static func migrate(_ arguments: [String]) async throws -> ChildProcess.Output {
        try await runBlocking { try ChildProcess.run(ChildProcess.product("outpost"), ["migrate"] + arguments) }
    }

    /// A database as the release before the contract step left it.
    static func previousRelease(at path: String) throws {
        let database = try SQLiteServerDatabase(path: path)
        defer { database.close() }
        try database.write { sql in
            try sql.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY)", [])
            for (index, migration) in ServerSchema.migrations(.sqlite).prefix(ServerSchema.slimResultsStep - 2).enumerated() {
                for statement in ServerSchema.statements(migration) { try sql.execute(statement, []) }
                try sql.execute("INSERT INTO schema_migrations (version) VALUES (?)", [.integer(Int64(index + 1))])
            }
        }
    }

    static func state(at path: String) throws -> SchemaState {
        let database = try SQLiteServerDatabase(path: path)
        defer { database.close() }
        return try SchemaState.read(database)
    }

    @Test func theContractStepRunsOnlyWhenAsked() async throws {
        let directory = try TemporaryDirectory(prefix: "outpost-migrate")
        let path = directory.path("server.sqlite")
        try Self.previousRelease(at: path)
        let known = ServerSchema.current(.sqlite)
        let previous = ServerSchema.slimResultsStep - 2

        let status = try await Self.migrate(["--status", "--database", path])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(try Self.state(at: path) == SchemaState(applied: previous, oldestServer: previous), "--status changes nothing")

        let expand = try await Self.migrate(["--database", path])
        #expect(expand.status == 0, "\(expand.stderr)")
        #expect(expand.stdout.contains("contract steps waiting: \(ServerSchema.slimResultsStep), \(ServerSchema.compactResultIDsStep) "), "\(expand.stdout)")
        #expect(try Self.state(at: path) == SchemaState(applied: previous + 1, oldestServer: previous))

        let contract = try await Self.migrate(["--contract", "--database", path])
        #expect(contract.status == 0, "\(contract.stderr)")
        #expect(contract.stdout.contains("contract steps waiting: none"), "\(contract.stdout)")
        #expect(try Self.state(at: path) == SchemaState(applied: known, oldestServer: known))
    }

    @Test func contractAndStatusTogetherAreRefusedAndChangeNothing() async throws {
        let directory = try TemporaryDirectory(prefix: "outpost-migrate")
        let path = directory.path("server.sqlite")
        try Self.previousRelease(at: path)
        let before = try Self.state(at: path)
        let answer = try await Self.migrate(["--contract", "--status", "--database", path])
        #expect(answer.status == 2)
        #expect(answer.stderr.hasPrefix("error: ") && answer.stderr.split(separator: "\n").count == 1, "\(answer.stderr)")
        #expect(try Self.state(at: path) == before)
    }
}
