import Foundation
import Outpost
import OutpostCore
import OutpostSQLite
import OutpostTesting
import Testing

/// Coalescing happens only between entries that were never sent.
@Suite("Outbox coalescing", .timeLimit(.minutes(5)))
struct OutboxCoalescingTests {
    @Test func createThenUpdateIsOneCreate() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let id = try await store.create(Person(name: "Ana"))
        try await store.update(Person.self, id) { $0.phone = "555" }
        try await store.update(in: "people", id, patch: ["section": 3])
        let entries = try await store.outboxEntries()
        #expect(entries.count == 1)
        #expect(entries[0].op == .create)
        #expect(entries[0].data == ["name": "Ana", "phone": "555", "section": 3])
        #expect(entries[0].baseVersion == nil)
        #expect(entries[0].seq == nil)
    }

    /// A queued create is merged with the update field by field when it
    /// holds something other than its record (the usual create holds what
    /// the record held, and becomes the record's new data at once).
    @Test func aCreateHoldingOtherThanItsRecordTakesTheUpdatedFields() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let id = try await store.create(Person(name: "Ana"))
        let raw = try SQLiteConnection(path: store.path)
        _ = try raw.run("UPDATE outbox SET data = ? WHERE record_uuid = ?", [.text(#"{"name":"Ana","section":4}"#), .text(id.wireText)])
        raw.close()
        try await store.update(Person.self, id) { $0.phone = "555" }
        let entries = try await store.outboxEntries()
        #expect(entries.map(\.op) == [.create])
        #expect(entries[0].data == ["name": "Ana", "section": 4, "phone": "555"])
        #expect(try await store.get(Person.self, id)?.value == Person(name: "Ana", phone: "555"))
    }

    @Test func updateThenUpdateKeepsTheFirstServerBaseVersion() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        let id = try await store.create(Person(name: "Ana"))
        try await store.pushAll(to: server)
        let synced = try #require(try await store.get(Person.self, id))
        let serverVersion = try #require(synced.serverVersion)
        #expect(synced.syncState == .synced)

        try await store.update(Person.self, id) { $0.phone = "1" }
        try await store.update(Person.self, id) { $0.phone = "2" }
        try await store.update(Person.self, id) { $0.section = 9 }
        let entries = try await store.outboxEntries()
        #expect(entries.count == 1)
        #expect(entries[0].op == .update)
        #expect(entries[0].baseVersion == serverVersion, "the server's version, never one the device made up")
        #expect(entries[0].data == ["phone": "2", "section": 9])
    }

    @Test func createThenDeleteSendsNothing() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let id = try await store.create(Person(name: "Ana"))
        try await store.update(Person.self, id) { $0.phone = "1" }
        try await store.delete(Person.self, id)
        #expect(try await store.outboxEntries().isEmpty)
        #expect(try await store.get(Person.self, id) == nil)
        #expect(try await store.takePushBatch() == nil)
        #expect(try await store.integrityProblems() == [])
    }

    @Test func updateThenDeleteIsOneDeleteOnTheFirstBase() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        let id = try await store.create(Person(name: "Ana"))
        try await store.pushAll(to: server)
        let version = try #require(try await store.get(Person.self, id)?.serverVersion)
        try await store.update(Person.self, id) { $0.phone = "1" }
        try await store.delete(Person.self, id)
        let entries = try await store.outboxEntries()
        #expect(entries.map(\.op) == [.delete])
        #expect(entries[0].baseVersion == version)
        #expect(entries[0].data == nil)
        #expect(try await store.get(Person.self, id) == nil, "a deleted record is hidden at once")
    }

    @Test func anEntryThatWasSentIsNeverMerged() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let id = try await store.create(Person(name: "Ana"))
        let batch = try #require(try await store.takePushBatch())
        try await store.release(batch, failure: .unknownOutcome("timed out"))
        try await store.update(Person.self, id) { $0.phone = "555" }
        let entries = try await store.outboxEntries()
        #expect(entries.map(\.op) == [.create, .update])
        #expect(entries[0].seq == batch.request.mutations[0].seq)
        #expect(entries[0].data == ["name": "Ana"], "the sent create keeps its content")
        #expect(entries[1].seq == nil)
        #expect(entries[1].baseVersion == nil, "never conditioned on a version before the create is confirmed")
    }

    @Test func anEditAfterAFailedSendIsANewEntry() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        let id = try await store.create(Person(name: "Ana"))
        try await store.pushAll(to: server)
        try await store.update(Person.self, id) { $0.phone = "1" }
        let failed = try #require(try await store.takePushBatch())
        // The request failed before reaching the server; still, it had a seq,
        // so the server may hold it: the next edit must not be merged into it.
        try await store.release(failed, failure: .notSent("connection refused"))
        try await store.update(Person.self, id) { $0.phone = "2" }
        let entries = try await store.outboxEntries()
        #expect(entries.count == 2)
        #expect(entries[0].data == ["phone": "1"])
        #expect(entries[0].attempts == 1)
        #expect(entries[0].failures == 0, "a transport failure does not use up the retry budget")
        #expect(entries[1].data == ["phone": "2"])
        #expect(entries[1].seq == nil)
    }

    @Test func baseVersionFollowsTheDevicesOwnConfirmedWrites() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        let id = try await store.create(Person(name: "Ana"))
        try await store.pushAll(to: server)
        let v1 = try #require(try await store.get(Person.self, id)?.serverVersion)

        try await store.update(Person.self, id) { $0.phone = "1" }
        let first = try #require(try await store.takePushBatch())
        #expect(first.request.mutations[0].baseVersion == v1)
        // Two edits while the first update is in flight: one new entry, still
        // based on v1 because the device has not seen its write confirmed.
        try await store.update(Person.self, id) { $0.phone = "2" }
        try await store.update(Person.self, id) { $0.section = 4 }
        #expect(try await store.outboxEntries().last?.baseVersion == v1)

        _ = try await store.settle(first, with: server.answer(first))
        let v2 = try #require(server.records[id]?.version)
        let second = try #require(try await store.takePushBatch())
        #expect(second.request.mutations.count == 1)
        #expect(second.request.mutations[0].baseVersion == v2, "rebased on the version its own write produced")
        #expect(second.request.mutations[0].data == ["phone": "2", "section": 4])
        _ = try await store.settle(second, with: server.answer(second))
        let final = try #require(try await store.get(Person.self, id))
        #expect(final.syncState == .synced)
        #expect(final.value == Person(name: "Ana", phone: "2", section: 4))
        #expect(server.records[id]?.data == ["name": "Ana", "phone": "2", "section": 4])
    }

    @Test func aPatchThatChangesNothingQueuesNothing() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        let id = try await store.create(Person(name: "Ana", phone: "1"))
        try await store.pushAll(to: server)
        try await store.update(Person.self, id) { $0.phone = "1" }
        try await store.update(in: "people", id, patch: ["name": "Ana"])
        #expect(try await store.outboxEntries().isEmpty)
        #expect(try await store.get(Person.self, id)?.syncState == .synced)
    }
}
