import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// What each result does to the store.
@Suite("Settling push results", .timeLimit(.minutes(5)))
struct SettlementTests {
    @Test func appliedAdoptsTheServersIdVersionAndTime() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        let id = try await store.create(Person(name: "Ana"))
        let settlement = try #require(try await store.pushAll(to: server))
        #expect(settlement.confirmed == [RecordReference(collection: "people", uuid: id)])
        let record = try #require(try await store.get(Person.self, id))
        #expect(record.syncState == .synced)
        #expect(record.serverID == server.records[id]?.id)
        #expect(record.serverVersion == server.records[id]?.version)
        #expect(record.serverUpdatedAt?.rawValue == "2026-11-29T10:00:00.123456Z")
        #expect(record.owner == "u-1")
        #expect(try await store.outboxEntries().isEmpty)
    }

    /// A confirmation with nothing else queued takes the server's copy whole
    /// (its data as the server stored it, its device time, owner and team);
    /// one with an edit made while the push was out keeps that edit, pending,
    /// conditioned on the version the push produced.
    @Test func confirmationAdoptsTheServersCopyUnlessAnEditWaits() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        let quiet = try await store.create(Person(name: "Ana"))
        let edited = try await store.create(Person(name: "Bea"))
        let batch = try #require(try await store.takePushBatch())
        try await store.update(Person.self, edited) { $0.phone = "555" }
        var answer = server.answer(batch)
        for index in answer.results.indices {
            // The server stores what it was sent in its own form: a field it adds, the writer's time.
            answer.results[index].record?.data?["section"] = 7
            answer.results[index].record?.deviceTime = ServerTimestamp(rawValue: "2026-11-29T09:59:00.000000Z")
        }
        let settlement = try await store.settle(batch, with: answer)
        #expect(Set(settlement.confirmed.map(\.uuid)) == [quiet, edited])

        let adopted = try #require(try await store.get(Person.self, quiet))
        #expect(adopted.syncState == .synced)
        #expect(adopted.value == Person(name: "Ana", section: 7), "the server's copy, with the field it added")
        #expect(adopted.serverID == server.records[quiet]?.id)
        #expect(adopted.serverVersion == server.records[quiet]?.version)
        #expect(adopted.serverUpdatedAt?.rawValue == "2026-11-29T10:00:00.123456Z")
        #expect(adopted.deviceTime == ServerTimestamp(rawValue: "2026-11-29T09:59:00.000000Z").date)
        #expect(adopted.owner == "u-1" && adopted.team == "t-1")

        let kept = try #require(try await store.get(Person.self, edited))
        #expect(kept.syncState == .pending, "the edit made meanwhile still has to go")
        #expect(kept.value == Person(name: "Bea", phone: "555"), "the local edit stays visible")
        #expect(kept.serverVersion == server.records[edited]?.version)
        let waiting = try await store.outboxEntries()
        #expect(waiting.map(\.op) == [.update])
        #expect(waiting.first?.baseVersion == server.records[edited]?.version, "conditioned on the version the push produced")
    }

    @Test func conflictKeepsTheServerCopyAndReportsTheLostEdit() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        let id = try await store.create(Person(name: "Ana"))
        try await store.pushAll(to: server)
        server.editElsewhere(id, ["phone": "999"])

        try await store.update(Person.self, id) { $0.phone = "555" }
        let settlement = try #require(try await store.pushAll(to: server) { _ in .conflict })
        #expect(settlement.conflicts.count == 1)
        let record = try #require(try await store.get(Person.self, id))
        #expect(record.value.phone == "999", "server_wins: the server copy prevails")
        #expect(record.syncState == .synced)
        let reports = try await store.conflicts()
        #expect(reports.count == 1)
        #expect(reports[0].localChange == ["phone": "555"], "the lost edit is kept for the person")
        #expect(reports[0].serverRecord?.data?["phone"] == "999")
        try await store.dismissConflict(reports[0].id)
        #expect(try await store.conflicts().isEmpty)
    }

    @Test func rejectedRecordShowsFieldErrorsAndStaysEditable() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        let id = try await store.create(in: "people", ["phone": "1"])
        let settlement = try #require(try await store.pushAll(to: server) { _ in .rejected })
        #expect(settlement.rejected.map(\.rejection.errors) == [["name": "is required"]])
        var record = try #require(try await store.get(in: "people", id))
        #expect(record.syncState == .rejected)
        #expect(record.rejection == Rejection(code: "invalid_field", errors: ["name": "is required"], op: .create))
        #expect(try await store.outboxSummary().rejected == 1)
        #expect(try await store.rejectedRecords().map(\.uuid) == [id])

        // The person fixes it: the whole record is created again.
        try await store.update(in: "people", id, patch: ["name": "Ana"])
        record = try #require(try await store.get(in: "people", id))
        #expect(record.syncState == .pending)
        #expect(record.rejection == nil)
        let entries = try await store.outboxEntries()
        #expect(entries.map(\.op) == [.create])
        #expect(entries[0].data == ["name": "Ana", "phone": "1"])
        try await store.pushAll(to: server)
        #expect(try await store.get(in: "people", id)?.syncState == .synced)
    }

    @Test func updateOfARecordDeletedOnTheServerIsAReportedConflictNotAResurrection() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        let id = try await store.create(Person(name: "Ana"))
        try await store.pushAll(to: server)
        try await store.update(Person.self, id) { $0.phone = "1" }
        try await store.pushAll(to: server) { _ in .notFound }
        #expect(try await store.get(Person.self, id) == nil)
        #expect(try await store.conflicts().map(\.localChange) == [["phone": "1"]])
        #expect(try await store.integrityProblems() == [])
    }

    @Test func deleteOfARecordAlreadyGoneIsDone() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        let id = try await store.create(Person(name: "Ana"))
        try await store.pushAll(to: server)
        try await store.delete(Person.self, id)
        let settlement = try #require(try await store.pushAll(to: server) { _ in .notFound })
        #expect(settlement.confirmed.count == 1)
        #expect(try await store.outboxEntries().isEmpty)
    }

    @Test func transientFailuresDoNotUseTheBudgetPermanentOnesDo() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        try await store.create(Person(name: "Ana"))
        for failure in [PushFailure.transient("503"), .unknownOutcome("timeout"), .permanent("400")] {
            let batch = try #require(try await store.takePushBatch())
            try await store.release(batch, failure: failure)
        }
        let entry = try #require(try await store.outboxEntries().first)
        #expect(entry.attempts == 3)
        #expect(entry.failures == 1)
        #expect(entry.lastError == "400")
        #expect(try await store.outboxSummary().awaitingConfirmation == 1)
    }
}

/// Children go after their parent; a refused parent holds them.
@Suite("Parents and children", .timeLimit(.minutes(5)))
struct ParentChildTests {
    @Test func childrenAreSentAfterTheirParentsCreate() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        let (parent, children) = try await store.write { tx in
            let parent = try tx.create(Person(name: "Ana"))
            let first = try tx.create(Visit(person: parent.wireText, visitedAt: "2026-11-29T09:00:00Z"))
            let second = try tx.create(Visit(person: parent.wireText, visitedAt: "2026-11-29T10:00:00Z"))
            return (parent, [first, second])
        }
        // A later edit of the parent coalesces into its create, which keeps its place.
        try await store.update(Person.self, parent) { $0.phone = "1" }
        let batch = try #require(try await store.takePushBatch())
        #expect(batch.request.mutations.map(\.uuid) == [parent] + children)
        _ = try await store.settle(batch, with: server.answer(batch))
        #expect(try await store.outboxEntries().isEmpty)
    }

    @Test func childrenWaitWhileTheParentCreateIsUnconfirmed() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        let parent = try await store.create(Person(name: "Ana"))
        let parentBatch = try #require(try await store.takePushBatch())
        try await store.release(parentBatch, failure: .unknownOutcome("timeout"))
        let child = try await store.create(Visit(person: parent.wireText, visitedAt: "2026-11-29T09:00:00Z"))
        // The resent create and the child may go together: the create comes first.
        let batch = try #require(try await store.takePushBatch(limit: 1))
        #expect(batch.request.mutations.map(\.uuid) == [parent])
        _ = try await store.settle(batch, with: server.answer(batch))
        let next = try #require(try await store.takePushBatch())
        #expect(next.request.mutations.map(\.uuid) == [child])
    }

    @Test func childrenOfARefusedParentAreHeldWithoutSeqAndReported() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        let parent = try await store.create(in: "people", ["phone": "1"])
        let parentBatch = try #require(try await store.takePushBatch())
        let child = try await store.create(Visit(person: parent.wireText, visitedAt: "2026-11-29T09:00:00Z"))
        _ = try await store.settle(parentBatch, with: server.answer(parentBatch) { _ in .rejected })

        // The child is neither sent nor dropped.
        #expect(try await store.takePushBatch() == nil)
        let held = try await store.heldEntries()
        #expect(held.map(\.entry.record.uuid) == [child])
        #expect(held[0].refusedParent == RecordReference(collection: "people", uuid: parent))
        #expect(held[0].entry.seq == nil)
        #expect(try await store.outboxSummary().held == 1)
        #expect(try await store.get(Visit.self, child)?.syncState == .pending)

        // The person fixes the parent: parent first, then the child.
        try await store.update(in: "people", parent, patch: ["name": "Ana"])
        #expect(try await store.heldEntries().isEmpty)
        var sent: [UUID] = []
        while let batch = try await store.takePushBatch() {
            sent += batch.request.mutations.map(\.uuid)
            _ = try await store.settle(batch, with: server.answer(batch))
        }
        #expect(sent == [parent, child])
        #expect(server.records[child]?.data?["person"] == .string(parent.wireText))
        #expect(try await store.integrityProblems() == [])
    }
}
