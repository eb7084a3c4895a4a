import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// What "sent" and "in flight" mean, with the cases a memory-only in-flight set gets wrong.
@Suite("In-flight entries", .timeLimit(.minutes(5)))
struct InFlightTests {
    @Test func createThenDeleteWhileTheInsertIsInFlight() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        let id = try await store.create(Person(name: "Ana"))
        let insert = try #require(try await store.takePushBatch())
        #expect(try await store.get(Person.self, id)?.syncState == .sending)

        try await store.delete(Person.self, id)
        var entries = try await store.outboxEntries()
        #expect(entries.map(\.op) == [.create, .delete], "the create is not cancelled: the server may hold it")
        #expect(entries[1].baseVersion == nil, "the version is not known yet")
        #expect(try await store.get(Person.self, id) == nil)

        // The insert completes on the server; the record must not come back.
        _ = try await store.settle(insert, with: server.answer(insert))
        entries = try await store.outboxEntries()
        #expect(entries.map(\.op) == [.delete])
        #expect(entries[0].baseVersion == server.records[id]?.version, "now conditioned on the created version")
        #expect(try await store.get(Person.self, id) == nil)

        try await store.pushAll(to: server)
        #expect(server.records[id]?.deleted == true)
        #expect(try await store.outboxEntries().isEmpty)
        #expect(try await store.integrityProblems() == [])
    }

    @Test func aSecondFlushNeverResendsAnInFlightEntry() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        let first = try await store.create(Person(name: "Ana"))
        let batch = try #require(try await store.takePushBatch())
        #expect(batch.request.mutations.map(\.uuid) == [first])

        // Reconnect and pull-to-refresh at once: the second flush gets nothing,
        // not the in-flight insert and not a later seq that could overtake it.
        let second = try await store.create(Person(name: "Bea"))
        #expect(try await store.takePushBatch() == nil)
        #expect(try await store.outboxSummary().sending == 1)
        #expect(try await store.outboxSummary().pending == 1)

        _ = try await store.settle(batch, with: server.answer(batch))
        let next = try #require(try await store.takePushBatch())
        #expect(next.request.mutations.map(\.uuid) == [second])
        #expect(next.request.mutations[0].seq > batch.request.mutations[0].seq)
    }

    @Test func afterReopeningNothingIsInFlight() async throws {
        let fixture = try StoreFixture()
        let id = try await fixture.store.create(Person(name: "Ana"))
        let batch = try #require(try await fixture.store.takePushBatch())
        await fixture.store.close()

        let reopened = try fixture.reopen()
        #expect(await reopened.inFlightBatch == nil)
        #expect(try await reopened.get(Person.self, id)?.syncState == .pending, "not 'sending' after a restart")
        let again = try #require(try await reopened.takePushBatch())
        #expect(again.request.mutations == batch.request.mutations, "same seq, same id, same content")
    }

    /// The case a naive queue gets wrong: its in-flight set is memory only, so after a
    /// restart its queue would cancel a create the server may already hold.
    @Test func deleteAfterRestartQueuesAServerDeleteForASentCreate() async throws {
        let fixture = try StoreFixture()
        let server = ScriptedServer()
        let id = try await fixture.store.create(Person(name: "Ana"))
        let batch = try #require(try await fixture.store.takePushBatch())
        // The server applied the insert, but the process was killed before the answer.
        _ = server.answer(batch)
        await fixture.store.close()

        let store = try fixture.reopen()
        try await store.delete(Person.self, id)
        let entries = try await store.outboxEntries()
        #expect(entries.map(\.op) == [.create, .delete])
        #expect(entries[0].seq == batch.request.mutations[0].seq)

        // Draining resends the create (the server answers duplicate) then deletes.
        let resend = try #require(try await store.takePushBatch())
        #expect(resend.request.mutations.map(\.op) == [.create])
        let duplicate = PushResponse(
            results: [
                MutationResult(
                    seq: resend.request.mutations[0].seq, id: resend.request.mutations[0].id, status: .duplicate,
                    record: server.records[id], originalStatus: .applied)
            ], lastSeq: resend.request.mutations[0].seq, serverTime: server.time)
        let settlement = try await store.settle(resend, with: duplicate)
        #expect(settlement.duplicates == 1)
        try await store.pushAll(to: server)
        #expect(server.records[id]?.deleted == true, "no resurrection")
        #expect(try await store.outboxEntries().isEmpty)
        #expect(try await store.get(Person.self, id) == nil)
    }

    @Test func settlingABatchThatIsNotInFlightIsRefused() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        try await store.create(Person(name: "Ana"))
        let batch = try #require(try await store.takePushBatch())
        _ = try await store.settle(batch, with: server.answer(batch))
        await #expect(throws: OutboxError.notInFlight) {
            _ = try await store.settle(batch, with: server.answer(batch))
        }
    }

    @Test func unansweredEntriesKeepTheirSeqAndGoAgain() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        try await store.create(Person(name: "Ana"))
        try await store.create(Person(name: "Bea"))
        let batch = try #require(try await store.takePushBatch())
        var response = server.answer(batch)
        response.results.removeLast()
        let settlement = try await store.settle(batch, with: response)
        #expect(settlement.unanswered.count == 1)
        let again = try #require(try await store.takePushBatch())
        #expect(again.request.mutations == [batch.request.mutations[1]])
    }
}

/// Seqs must reach the server in increasing order, even across batch sizes.
@Suite("Seq order across batches", .timeLimit(.minutes(5)))
struct SeqOrderTests {
    /// A higher seq reaching the server before a lower one would make the lower
    /// one a false duplicate that never applies: the order must hold even when
    /// the batch size shrinks between attempts.
    @Test func noNewSeqGoesOutWhileASentEntryWaitsForALaterBatch() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        for index in 0..<5 { try await store.create(Person(name: "P\(index)")) }
        let big = try #require(try await store.takePushBatch(limit: 5))
        try await store.release(big, failure: .unknownOutcome("timeout"))
        try await store.create(Person(name: "Later"))
        // A smaller batch (e.g. a new app version): the five sent entries go
        // first, over two batches, and the new one only after them.
        var seqs: [Int64] = []
        while let batch = try await store.takePushBatch(limit: 3) {
            seqs += batch.request.mutations.map(\.seq)
            _ = try await store.settle(batch, with: server.answer(batch))
        }
        #expect(seqs == seqs.sorted(), "seqs go out in increasing order: \(seqs)")
        #expect(seqs.count == 6)
        #expect(Array(seqs.prefix(5)) == big.request.mutations.map(\.seq))
    }
}
