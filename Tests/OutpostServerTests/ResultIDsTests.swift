import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// Push results keep their client and mutation ids as 16 bytes on SQLite
/// (text on PostgreSQL), and every lookup of a retry finds them: on a new
/// database, and on one whose results were written as text before the
/// contract step converted them.
@Suite("Push results' ids as bytes", .timeLimit(.minutes(5)))
struct ResultIDsTests {
    /// Each stored row's ids: their SQL types and lengths, and their text.
    static func storedIDs(_ database: any ServerDatabase) throws -> [(types: String, client: String, mutation: String)] {
        let types =
            database.dialect == .postgres
            ? "'text text'"
            : "typeof(client_id) || ' ' || length(client_id) || ' ' || typeof(mutation_id) || ' ' || length(mutation_id)"
        return try database.read { sql in
            try sql.query("SELECT \(types), client_id, mutation_id FROM mutation_results ORDER BY user_id, seq", []).map {
                ($0.string(0), ResultIDs.text($0.values[1]), ResultIDs.text($0.values[2]))
            }
        }
    }

    /// Retries through every lookup the push makes: by seq, by mutation id
    /// under a new seq, a reused seq with another id, and `GET /v1/mutations/{id}`.
    static func retriesAnswerAsFirst(
        _ live: LiveServer, device: TestDevice, token: String, first: PushRequest, answers: PushResponse
    ) async throws {
        let again = try await live.push(first, token: token)
        #expect(again.results.map(\.status).allSatisfy { $0 == .duplicate })
        #expect(again.results.map(\.originalStatus) == answers.results.map { Optional($0.status) })
        #expect(again.results.map(\.record) == answers.results.map(\.record), "each as its first processing left it")

        // The same change under a new seq (a copied database): found by its id.
        let renumbered = try #require(first.mutations.first)
        device.seq += 1
        let moved = Mutation(
            seq: device.seq, id: renumbered.id, op: renumbered.op, collection: renumbered.collection, uuid: renumbered.uuid,
            baseVersion: renumbered.baseVersion, data: renumbered.data)
        let byID = try await live.push(device.request(moved), token: token)
        #expect(byID.results.first?.status == .duplicate && byID.results.first?.originalStatus == answers.results.first?.status)

        // A restored device numbers a new change with a used seq: refused, nothing applied.
        let reused = Mutation(
            seq: renumbered.seq, id: UUID(), op: .create, collection: "people", uuid: UUID(), baseVersion: nil, data: ["name": "Other"])
        let refused = try await live.send("POST", "/v1/push", token: token, body: try WireCoding.encode(device.request(reused)))
        #expect(refused.status == 409 && refused.error?.code == .clientBehind && refused.error?.seqs == [renumbered.seq])

        let lookup = try await live.get("/v1/mutations/\(renumbered.id.wireText)", token: token).decode(MutationLookup.self)
        #expect(lookup.status == answers.results.first?.status)
        let unknown = try await live.get("/v1/mutations/\(UUID().wireText)", token: token)
        #expect(unknown.status == 404)
    }

    @Test func anIDReadsBackAsItsWireTextInEitherForm() {
        let id = UUID()
        let bytes = ResultIDs(asBytes: true)
        guard case .blob(let data) = bytes.value(id) else {
            Issue.record("bound as \(bytes.value(id)), not as bytes")
            return
        }
        #expect(data.count == 16)
        #expect(ResultIDs.text(.blob(data)) == id.wireText)
        #expect(bytes.value(id.wireText) == .blob(data))
        #expect(ResultIDs(asBytes: false).value(id) == .text(id.wireText))
        #expect(ResultIDs.text(.text(id.wireText)) == id.wireText)
        // Text that is no UUID's wire text is bound as text: such rows were never converted.
        #expect(bytes.value("c") == .text("c"))
        #expect(bytes.value(id.uuidString.uppercased()) == .text(id.uuidString.uppercased()))
        #expect(ResultIDs(dialect: .sqlite, oldestServer: ServerSchema.compactResultIDsStep).asBytes)
        #expect(!ResultIDs(dialect: .sqlite, oldestServer: ServerSchema.compactResultIDsStep - 1).asBytes)
        #expect(!ResultIDs(dialect: .postgres, oldestServer: ServerSchema.compactResultIDsStep).asBytes)
    }

    @Test(arguments: Backend.available)
    func aNewDatabaseKeepsIDsAsBytesAndAnswersRetries(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("u-1")
        let device = TestDevice()
        let create = device.mutation(.create, data: ["name": "Ana", "section": 3])
        let edit = device.mutation(.update, uuid: create.uuid, data: ["section": 4])
        let refused = device.mutation(.create, "no_such_collection", data: ["name": "x"])
        let request = device.request(create, edit, refused)
        let first = try await live.push(request, token: token)
        #expect(first.results.map(\.status) == [.applied, .applied, .rejected])

        let stored = try Self.storedIDs(live.database)
        let form = backend == .sqlite ? "blob 16 blob 16" : "text text"
        #expect(stored.map(\.types) == Array(repeating: form, count: 3))
        #expect(stored.map(\.client) == Array(repeating: device.clientID.wireText, count: 3))
        #expect(stored.map(\.mutation) == [create.id.wireText, edit.id.wireText, refused.id.wireText])
        try await Self.retriesAnswerAsFirst(live, device: device, token: token, first: request, answers: first)
    }

    @Test(arguments: Backend.available)
    func theContractStepConvertsResultsWrittenAsText(_ backend: Backend) async throws {
        let live = try LiveServer(backend, prepare: SchemaUpgradeTests.migrateAsThePreviousRelease)
        #expect(try SchemaState.read(live.database).pendingContract(live.database.dialect).contains(ServerSchema.compactResultIDsStep))
        let ana = try live.token("u-1")
        let bea = try live.token("u-2", .coordinator)
        let device = TestDevice()
        let other = TestDevice()
        let create = device.mutation(.create, data: ["name": "Ana", "section": 3])
        let edit = device.mutation(.update, uuid: create.uuid, data: ["section": 4])
        let gone = device.mutation(.delete, uuid: UUID())
        let request = device.request(create, edit, gone)
        let first = try await live.push(request, token: ana)
        #expect(first.results.map(\.status) == [.applied, .applied, .notFound])
        let clash = other.mutation(.create, uuid: create.uuid, data: ["name": "Bea", "section": 1])
        #expect(try await live.push(other.request(clash), token: bea).results.first?.status == .conflict)
        // A row no UUID names (written by hand): it stays as it is, and the step does not fail on it.
        try live.database.write { sql in
            try sql.execute(
                """
                INSERT INTO mutation_results (user_id, client_id, seq, mutation_id, result, created_at)
                VALUES ('hand', 'not-a-client', 1, 'not-a-mutation', '{"status":"applied"}', '2026-01-01T00:00:00.000Z')
                """, [])
        }
        let rowsInOrder = "SELECT rowid, seq, created_at FROM mutation_results ORDER BY rowid"
        let rowsBefore = backend == .sqlite ? try live.database.read { try $0.query(rowsInOrder, []).map(\.values) } : []
        let textForm = try Self.storedIDs(live.database)
        #expect(textForm.map(\.types).allSatisfy { ["text 36 text 36", "text 12 text 14", "text text"].contains($0) })

        try ServerSchema.migrate(live.database, contract: true)
        let known = ServerSchema.current(live.database.dialect)
        #expect(try SchemaState.read(live.database) == SchemaState(applied: known, oldestServer: known))

        let converted = try Self.storedIDs(live.database)
        #expect(converted.map(\.client) == textForm.map(\.client) && converted.map(\.mutation) == textForm.map(\.mutation))
        if backend == .sqlite {
            #expect(converted.filter { $0.types == "blob 16 blob 16" }.count == 4, "\(converted.map(\.types))")
            #expect(converted.first { $0.client == "not-a-client" }?.types == "text 12 text 14")
            let rowsAfter = try live.database.read { try $0.query(rowsInOrder, []).map(\.values) }
            #expect(rowsAfter == rowsBefore, "every row under its own rowid, in time order")
            let objects = try live.database.read { sql in
                try sql.query("SELECT name FROM sqlite_master WHERE tbl_name LIKE 'mutation_results%' ORDER BY name", []).map {
                    $0.string(0)
                }
            }
            #expect(objects == ["mutation_results", "mutation_results_by_mutation", "sqlite_autoindex_mutation_results_1"])
        }
        try await Self.retriesAnswerAsFirst(live, device: device, token: ana, first: request, answers: first)
        let retried = try #require(try await live.push(other.request(clash), token: bea).results.first)
        #expect(retried.status == .duplicate && retried.originalStatus == .conflict)
    }
}
