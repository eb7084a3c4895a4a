import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// Rolling upgrades: expand steps leave the previous release serving, the
/// contract step waits until asked, and push results slimmed by it still
/// answer retries as the first answers did. On both backends.
@Suite("Schema upgrades and slim push results", .timeLimit(.minutes(5)))
struct SchemaUpgradeTests {
    /// The steps of the release before the slimming, as it left a database.
    static let previousRelease = ServerSchema.slimResultsStep - 2

    /// Takes the previous release's steps only, recorded as it recorded them.
    static func migrateAsThePreviousRelease(_ database: any ServerDatabase) throws {
        try database.write { sql in
            try sql.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY)", [])
            for (index, migration) in ServerSchema.migrations(database.dialect).prefix(previousRelease).enumerated() {
                for statement in ServerSchema.statements(migration) { try sql.execute(statement, []) }
                try sql.execute("INSERT INTO schema_migrations (version) VALUES (?)", [.integer(Int64(index + 1))])
            }
        }
    }

    static func storedResults(_ database: any ServerDatabase) throws -> [(result: String, version: Int64?)] {
        try database.read { sql in
            try sql.query("SELECT result, record_version FROM mutation_results ORDER BY client_id, seq", []).map {
                ($0.string(0), $0.optionalInt(1))
            }
        }
    }

    /// What the previous release's readiness compares with its own count.
    static func legacyMark(_ database: any ServerDatabase) throws -> Int64 {
        try database.read { try $0.first("SELECT MAX(version) FROM schema_migrations")?.int(0) ?? 0 }
    }

    @Test(arguments: Backend.available)
    func aNewDatabaseTakesEveryStepAndKeepsResultsWithoutTheirRecord(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let known = ServerSchema.current(live.database.dialect)
        #expect(try SchemaState.read(live.database) == SchemaState(applied: known, oldestServer: known))
        let token = try live.token("u-1")
        let device = TestDevice()
        let create = device.mutation(.create, data: ["name": "Ana", "section": 3])
        let edit = device.mutation(.update, uuid: create.uuid, data: ["section": 4])
        let first = try await live.push(device.request(create, edit), token: token)
        #expect(first.results.map(\.status) == [.applied, .applied])
        for row in try Self.storedResults(live.database) {
            #expect(!row.result.contains("Ana") && !row.result.contains("record"), "no copy of the record: \(row.result)")
            #expect(row.version != nil)
        }
        // The create's record has changed since: its answer is rebuilt from history.
        let again = try await live.push(device.request(create, edit), token: token)
        #expect(again.results.map(\.status) == [.duplicate, .duplicate])
        #expect(again.results.map(\.originalStatus) == [.applied, .applied])
        #expect(again.results.map(\.record) == first.results.map(\.record), "each as its first processing left it")
        // A lookup by id gives the record while it is still at that version.
        let lookup = try await live.get("/v1/mutations/\(edit.id.wireText)", token: token).decode(MutationLookup.self)
        #expect(lookup.status == .applied && lookup.record == first.results[1].record)
        let older = try await live.get("/v1/mutations/\(create.id.wireText)", token: token).decode(MutationLookup.self)
        #expect(older.status == .applied && older.record == nil)
    }

    @Test(arguments: Backend.available)
    func thePreviousReleasesResultsAnswerRetriesTheSameAfterTheContractStep(_ backend: Backend) async throws {
        let live = try LiveServer(backend, prepare: Self.migrateAsThePreviousRelease)
        let known = ServerSchema.current(live.database.dialect)
        // Started on the previous release's database: the expand step only.
        let expanded = SchemaState(applied: Self.previousRelease + 1, oldestServer: Self.previousRelease)
        #expect(try SchemaState.read(live.database) == expanded)
        #expect(try Self.legacyMark(live.database) == Int64(Self.previousRelease), "the previous release still serves")
        #expect(try await live.get("/v1/ready", token: nil).status == 200)

        let ana = try live.token("u-1")
        let bea = try live.token("u-2", .coordinator)
        let device = TestDevice()
        let other = TestDevice()
        let create = device.mutation(.create, data: ["name": "Ana", "section": 3])
        let edit = device.mutation(.update, uuid: create.uuid, data: ["section": 4])
        let refused = device.mutation(.create, "no_such_collection", data: ["name": "x"])
        let gone = device.mutation(.delete, uuid: UUID())
        let first = try await live.push(device.request(create, edit, refused, gone), token: ana)
        #expect(first.results.map(\.status) == [.applied, .applied, .rejected, .notFound])
        let clash = other.mutation(.create, uuid: create.uuid, data: ["name": "Bea", "section": 1])
        let lost = try await live.push(other.request(clash), token: bea)
        #expect(lost.results.first?.status == .conflict)
        // Until the contract step, results are whole: the previous release reads them.
        #expect(try Self.storedResults(live.database).filter { $0.result.contains("\"record\"") }.count == 3)

        try ServerSchema.migrate(live.database, contract: true)
        #expect(try SchemaState.read(live.database) == SchemaState(applied: known, oldestServer: known))
        #expect(try Self.legacyMark(live.database) == Int64(known), "the previous release now stops")
        #expect(try Self.storedResults(live.database).allSatisfy { !$0.result.contains("Ana") }, "slimmed")

        // Someone else changes the record: the conflict's retry carries the current copy.
        let later = try await live.push(device.request(device.mutation(.update, uuid: create.uuid, data: ["section": 5])), token: ana)
        let current = try #require(later.results.first?.record)
        let again = try await live.push(device.request(create, edit, refused, gone), token: ana)
        #expect(again.results.map(\.originalStatus) == [.applied, .applied, .rejected, .notFound])
        #expect(again.results.map(\.record) == first.results.map(\.record), "as the first answers said")
        #expect(again.results[2].code == "unknown_collection" && again.results[2].errors == first.results[2].errors)
        let retried = try #require(try await live.push(other.request(clash), token: bea).results.first)
        #expect(retried.status == .duplicate && retried.originalStatus == .conflict)
        #expect(retried.record == current, "the server's copy as it is now")
        // Written after the contract step: slim from the start.
        #expect(try Self.storedResults(live.database).filter { $0.result.contains("\"record\"") }.isEmpty)
    }

    @Test(arguments: Backend.available)
    func aStartDoesNotContractAndMigrateWithoutContractChangesNothingMore(_ backend: Backend) async throws {
        let live = try LiveServer(backend, prepare: Self.migrateAsThePreviousRelease)
        let before = try SchemaState.read(live.database)
        try ServerSchema.migrate(live.database)
        #expect(try SchemaState.read(live.database) == before)
        #expect(before.pendingContract(live.database.dialect) == [ServerSchema.slimResultsStep, ServerSchema.compactResultIDsStep])
        // A second server starting on it takes no step either.
        _ = try SyncServer(database: live.database, config: live.server.config, clock: live.clock)
        #expect(try SchemaState.read(live.database) == before)
    }

    @Test func theContractStepIsTheOnlyOneThatStopsTheRelease() {
        #expect(ServerSchema.required(.sqlite) == ServerSchema.slimResultsStep - 1, "this release serves before its contract step")
        #expect(ServerSchema.required(.postgres) == ServerSchema.slimResultsStep - 1)
        #expect(ServerSchema.contracts(ServerSchema.slimResultsStep))
        #expect(ServerSchema.contracts(ServerSchema.compactResultIDsStep))
        #expect(!ServerSchema.contracts(ServerSchema.slimResultsStep - 1))
        #expect(ServerSchema.contracts(1), "steps before the distinction each stopped the release before")
        #expect(ServerSchema.contractedAtStartThrough < ServerSchema.slimResultsStep)
    }
}

/// Housekeeping after the contract step, with no index on the results' age.
@Suite("Push results past the id map's horizon", .timeLimit(.minutes(3)))
struct ResultsByAgeTests {
    @Test(arguments: Backend.available)
    func oldResultsGoAndNewerOnesStayWhole(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("u-1")
        let device = TestDevice()
        let old = (0..<5).map { _ in device.mutation(.create, data: ["name": "Old", "section": 1]) }
        _ = try await live.push(PushRequest(clientID: device.clientID, mutations: old), token: token)
        live.clock.advance(by: 100 * 86_400)
        let recent = (0..<3).map { _ in device.mutation(.create, data: ["name": "Recent", "section": 2]) }
        _ = try await live.push(PushRequest(clientID: device.clientID, mutations: recent), token: token)
        live.clock.advance(by: 40 * 86_400)
        try live.server.runMaintenance()
        let kept = try live.database.read { sql in
            try sql.query("SELECT seq, result FROM mutation_results ORDER BY seq", []).map { ($0.int(0), $0.string(1)) }
        }
        #expect(kept.map(\.0) == recent.map(\.seq), "the results past 90 days are gone, the 40-day-old ones kept")
        #expect(kept.allSatisfy { $0.1.contains("applied") }, "kept whole past the 30 days: slim results are never emptied")
        let ageIndexes = try live.database.read { sql in
            try sql.query(
                live.database.dialect == .postgres
                    ? "SELECT indexdef FROM pg_indexes WHERE tablename = 'mutation_results' AND indexname = 'mutation_results_by_age'"
                    : "SELECT sql FROM sqlite_master WHERE name = 'mutation_results_by_age'", []
            ).map { $0.string(0) }
        }
        #expect(live.database.dialect == .postgres ? ageIndexes.first?.contains("brin") == true : ageIndexes.isEmpty, "\(ageIndexes)")
    }

    /// The bisection on a table whose rowids have gaps and whose times are not quite in order.
    @Test func theBoundaryIsTheNewestOldRow() throws {
        let directory = try TemporaryDirectory(prefix: "outpost-results-age")
        let database = try SQLiteServerDatabase(path: directory.path("server.sqlite"))
        defer { database.close() }
        try ServerSchema.migrate(database)
        let stamps = ["2026-01-01", "2026-01-02", "2026-01-05", "2026-01-03", "2026-01-06", "2026-01-09", "2026-01-10"]
        try database.write { sql in
            for (index, stamp) in stamps.enumerated() {
                try sql.execute(
                    "INSERT INTO mutation_results (rowid, user_id, client_id, seq, mutation_id, result, created_at) VALUES (?, 'u', 'c', ?, ?, '', ?)",
                    [.integer(Int64(index * 3 + 1)), .integer(Int64(index + 1)), .text(UUID().wireText), .text(stamp)])
            }
        }
        let boundaries = try database.read { sql in
            try ["2026-01-01", "2026-01-07", "2026-02-01"].map { try ResultsByAge.lastRowID(olderThan: $0, in: sql) }
        }
        #expect(boundaries == [nil, 13, 19])
        try database.write { try ResultsByAge.delete(olderThan: "2026-01-04", in: $0) }
        let left = try database.read { try $0.query("SELECT created_at FROM mutation_results ORDER BY rowid", []).map { $0.string(0) } }
        #expect(left == ["2026-01-05", "2026-01-06", "2026-01-09", "2026-01-10"], "never a row stamped later than the cutoff")
    }
}
