import Foundation
import Outpost
import OutpostCore
import OutpostSQLite
import OutpostTesting
import Testing

/// A push's body is written from the queue's stored text (each change's data
/// spliced in as it was stored, not parsed and written again), so it must
/// say exactly what the request as values says, sealed at rest or not.
@Suite("A push's body from the stored queue", .timeLimit(.minutes(2)))
struct PushBodyTests {
    /// Data that a careless splice would get wrong: escapes, other scripts,
    /// nesting, fractions, a field cleared by a patch.
    static let awkward: JSONObject = [
        "name": .string("Zoë \"Z\" O'Brien\\\n\t✓ 😀"), "section": .int(-3), "score": .double(2.5),
        "tags": .array([.string("a/b"), .null, .bool(true), .object(["deep": .array([.int(1)])])]),
    ]

    @Test(arguments: [false, true])
    func theBodySaysWhatTheRequestSays(sealed: Bool) async throws {
        let directory = try TemporaryDirectory()
        let cipher: AESGCMCipher? = sealed ? try AESGCMCipher(key: AESGCMCipher.makeKey()) : nil
        let store = try LocalStore(path: directory.path("device.sqlite"), collections: StoreFixture.collections, cipher: cipher)
        let server = ScriptedServer()
        let (kept, gone) = try await store.write { tx in
            (try tx.create(in: "people", Self.awkward), try tx.create(in: "people", ["name": .string("short-lived")]))
        }
        let first = try #require(try await store.takePushBatch())
        _ = try await store.settle(first, with: server.answer(first))
        try await store.write { tx in
            try tx.update(in: "people", kept, patch: ["section": .null, "name": .string("Zoë\u{0}?")])
            try tx.delete(in: "people", gone)
            _ = try tx.create(in: "visits", ["person": .string(kept.wireText), "visited_at": .string("2026-12-03")])
        }
        let batch = try #require(try await store.takePushBatch())
        #expect(batch.request.mutations.map(\.op) == [.update, .delete, .create])
        #expect(batch.request.mutations[0].baseVersion != nil, "conditioned on the confirmed version")
        #expect(batch.request.mutations[0].data?["section"] == .null, "a cleared field travels as null")
        #expect(batch.body == Data(batch.request.wireBytes()), "\(String(decoding: batch.body, as: UTF8.self))")
        // The server reads the body as the same request (its fast reader
        // leaves a body with a \u escape to the decoder).
        let read = try PushRequest.readWire([UInt8](batch.body)) ?? WireCoding.decode(PushRequest.self, from: batch.body)
        #expect(read == batch.request)
        // The seqs the body carries are the ones stored, one after another.
        let seqs = batch.request.mutations.map(\.seq)
        #expect(seqs == Array(seqs[0]..<(seqs[0] + 3)))
        #expect(try await store.outboxEntries().compactMap(\.seq) == seqs)
        await store.close()
    }

    /// Giving a batch's new entries their seqs is one statement; it must
    /// find each entry by its key, not walk the queue.
    @Test func seqsAreGivenByTheEntriesKeys() async throws {
        let fixture = try await StorePlanTests.closedStore(creates: 300)
        let plan = try StorePlanTests.plan(OutboxSeqQueries.numbering, in: fixture.path)
        #expect(plan.contains("SEARCH outbox USING INTEGER PRIMARY KEY (rowid=?)"), "\(plan)")
        #expect(!plan.contains("SCAN outbox"), "\(plan)")
    }

    /// A confirmed record keeps its data as the answer's bytes said it (the
    /// pull path does the same), not parsed and written out again; what the
    /// answer says, as values, is unchanged by that.
    @Test func aConfirmedRecordKeepsTheAnswersText() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let id = try await store.create(Person(name: "Ana", section: 1))
        let batch = try #require(try await store.takePushBatch())
        let mutation = try #require(batch.request.mutations.first)
        let dataText = #"{ "section" : 3, "name":"Ana" }"#
        let body = """
            {"results":[{"seq":\(mutation.seq),"id":"\(mutation.id.wireText)","status":"applied","record":{"collection":"people",\
            "uuid":"\(id.wireText)","id":7,"version":3,"updated_at":"2026-11-29T10:00:00.123456Z","deleted":false,"owner":"u-1",\
            "team":"t-1","data": \(dataText) }}],"last_seq":\(mutation.seq),"server_time":"2026-11-29T10:00:00.123456Z"}
            """
        let answer = try #require(PushResponse.readWire(Array(body.utf8)))
        #expect(answer == (try WireCoding.decode(PushResponse.self, from: Data(body.utf8))), "the same answer either way")
        let settlement = try await store.settle(batch, with: answer)
        #expect(settlement.confirmed.map(\.uuid) == [id])
        let record = try #require(try await store.get(Person.self, id))
        #expect(record.value == Person(name: "Ana", section: 3) && record.syncState == .synced && record.serverVersion == 3)
        let raw = try SQLiteConnection(path: fixture.path, readOnly: true)
        defer { raw.close() }
        let stored = try raw.query("SELECT data FROM people WHERE uuid = ?", [.text(id.wireText)]) { $0.string(0) }
        #expect(stored == [dataText])
    }

    /// Settling removes a batch's answered entries in one statement, each by its key.
    @Test func answeredEntriesAreRemovedByTheirKeys() async throws {
        let fixture = try await StorePlanTests.closedStore(creates: 300)
        let plan = try StorePlanTests.plan(OutboxSettleQueries.removing, in: fixture.path)
        #expect(plan.contains("SEARCH outbox USING INTEGER PRIMARY KEY (rowid=?)"), "\(plan)")
        #expect(!plan.contains("SCAN outbox"), "\(plan)")
    }
}
