import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// The search index follows every way a record's data changes: created,
/// edited, deleted, assigned, purged, seeded. On SQLite it is written by
/// the statements that write records, so FTS5's own check compares it with
/// the records it was built from, word by word.
@Suite("Search index", .timeLimit(.minutes(3)))
struct SearchIndexTests {
    @Test(arguments: Backend.available)
    func theIndexFollowsEveryChangeOfARecordsData(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let ana = try live.token("u-1", team: "t-1")
        let admin = try live.token("a-1", .admin, team: "hq")
        let device = TestDevice()
        let (renamed, deleted, assigned, purged) = (UUID(), UUID(), UUID(), UUID())
        let created = try await live.push(
            device.request(
                device.mutation(.create, uuid: renamed, data: ["name": "Quillon Adebayo"]),
                device.mutation(.create, uuid: deleted, data: ["name": "Marisol Okafor"]),
                device.mutation(.create, uuid: assigned, data: ["name": "Tiberius Lund"]),
                device.mutation(.create, uuid: purged, data: ["name": "Ottoline Varga"])), token: ana)
        let version = try #require(created.results.first?.record?.version)
        // Two edits of one record in one push: the second removes the words
        // the first added, which are not yet on disk.
        let edits = try await live.push(
            device.request(
                device.mutation(.update, uuid: renamed, base: version, data: ["name": "Quillon Mbeki"]),
                device.mutation(.update, uuid: renamed, data: ["name": "Quillon Ferreira"]),
                device.mutation(.update, uuid: deleted, data: ["name": "Marisol Okafor"]),  // the same text again
                device.mutation(.delete, uuid: deleted), device.mutation(.delete, uuid: purged)), token: ana)
        #expect(edits.results.allSatisfy { $0.status == .applied }, "\(edits.results.map(\.status))")
        let moved = try await live.send(
            "POST", "/v1/records/people/\(assigned.wireText)/assign", token: admin, body: Data(#"{"owner": "u-1", "team": "t-1"}"#.utf8))
        #expect(moved.status == 200, "\(moved.text)")
        live.clock.advance(by: 91 * 86_400)
        try live.server.runMaintenance()

        func found(_ words: String) async throws -> Set<UUID> {
            let answer = try await live.get("/v1/search?collection=people&q=\(words)", token: ana)
            #expect(answer.status == 200, "\(answer.text)")
            return Set(try answer.decode(SearchResponse.self).records.map(\.uuid))
        }
        #expect(try await found("ferreira") == [renamed])
        #expect(try await found("adebayo").isEmpty, "a replaced name is still found")
        #expect(try await found("mbeki").isEmpty, "a name replaced within the same push is still found")
        #expect(try await found("okafor").isEmpty, "a deleted record is still found")
        #expect(try await found("varga").isEmpty, "a purged record is still found")
        #expect(try await found("tiberius") == [assigned])

        guard backend == .sqlite else { return }
        try live.database.write { sql in
            // Compares the index with the records' data (external content): fails on any stale or missing word.
            try sql.execute("INSERT INTO records_search (records_search, rank) VALUES ('integrity-check', 1)", [])
        }
    }

    /// A push's words reach the index on disk once, at its commit. Written
    /// by a trigger, every record's insert ran in a savepoint of its own and
    /// FTS5 wrote a segment per record, merging them as the push went on.
    @Test func aPushWritesItsWordsToTheIndexOnce() async throws {
        let live = try LiveServer(.sqlite)
        let ana = try live.token("u-1", team: "t-1")
        let device = TestDevice()
        func indexRows() throws -> Int64 {
            try live.database.read { try $0.first("SELECT COUNT(*) FROM records_search_data", [])?.int(0) ?? 0 }
        }
        let before = try indexRows()
        let answer = try await live.push(
            PushRequest(
                clientID: device.clientID,
                mutations: (0..<100).map { device.mutation(.create, data: ["name": .string("Person \($0)")]) }), token: ana)
        #expect(answer.results.allSatisfy { $0.status == .applied })
        let written = try indexRows() - before
        #expect(written <= 2, "one segment for the push (and its structure), not one per record: \(written) rows")
        #expect(try await live.get("/v1/search?collection=people&q=person", token: ana).decode(SearchResponse.self).records.count > 0)
    }

    /// A server whose database was made with the triggers drops them and
    /// keeps the index it had.
    @Test func aDatabaseIndexedByTriggersKeepsItsIndex() throws {
        let directory = try TemporaryDirectory(prefix: "outpost-search")
        let path = directory.path("server.sqlite")
        let database = try SQLiteServerDatabase(path: path)
        defer { database.close() }
        try database.write { sql in
            try sql.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY)", [])
            // Every migration before the one that drops the triggers.
            let all = ServerSchema.migrations(.sqlite)
            let dropping = try #require(all.firstIndex { $0.contains("DROP TRIGGER records_search_insert") })
            for (index, migration) in all[..<dropping].enumerated() {
                for statement in ServerSchema.statements(migration) { try sql.execute(statement, []) }
                try sql.execute("INSERT INTO schema_migrations (version) VALUES (?)", [.integer(Int64(index + 1))])
            }
            try sql.execute(
                """
                INSERT INTO records (collection, uuid, version, updated_at, owner, team, created_by_user, created_by_client, data)
                VALUES ('people', ?, 1, '2026-01-01T00:00:00Z', 'u-1', 't-1', 'u-1', 'c', '{"name":"Evangelina Soto"}')
                """, [.text(UUID().wireText)])
        }
        try ServerSchema.migrate(database)
        let (triggers, matches) = try database.read { sql in
            (
                try sql.query("SELECT name FROM sqlite_master WHERE type = 'trigger'", []).map { $0.string(0) },
                try sql.first("SELECT COUNT(*) FROM records_search WHERE records_search MATCH 'evangelina'", [])?.int(0)
            )
        }
        #expect(triggers == ["records_search_delete"])
        #expect(matches == 1, "the words indexed by the old trigger are kept")
    }
}
