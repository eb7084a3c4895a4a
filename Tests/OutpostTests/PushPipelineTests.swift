import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// The batch after the one on the wire is taken while it is out, and sent
/// the moment it is answered: what that batch may hold, and what becomes of
/// it when the push before it fails.
@Suite("Push pipeline", .timeLimit(.minutes(5)))
struct PushPipelineTests {
    @Test func theBatchTakenAheadHoldsNothingThatDependsOnTheOneOut() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        let ana = try await store.create(Person(name: "Ana"))
        let out = try #require(try await store.takePushBatch(limit: 1))
        #expect(out.entries.map(\.record.uuid) == [ana])
        // Made while Ana's create is on the wire: an edit of Ana, a visit to
        // her (a child of the create) and a record of its own.
        try await store.update(Person.self, ana) { $0.phone = "555" }
        let visit = try await store.create(Visit(person: ana.wireText, visitedAt: "2026-11-29"))
        let bea = try await store.create(Person(name: "Bea"))

        #expect(try await store.takePushBatch() == nil, "no ordinary batch while one is out")
        let ahead = try #require(try await store.takePushBatch(after: out, limit: 10))
        #expect(ahead.entries.map(\.record.uuid) == [bea], "only what does not wait for Ana's answer")
        #expect(ahead.entries.map(\.seq) == [out.entries[0].seq! + 1], "seqs in the order the batches go")
        #expect(try await store.takePushBatch(after: ahead, limit: 10) == nil, "one batch ahead at most")

        _ = try await store.settle(out, with: server.answer(out))
        _ = try await store.settle(ahead, with: server.answer(ahead))
        let rest = try #require(try await store.takePushBatch())
        #expect(rest.entries.map(\.record.uuid) == [ana, visit])
        #expect(rest.entries[0].baseVersion == server.records[ana]?.version, "the edit is conditioned on what Ana's create produced")
    }

    @Test func aBatchGivenBackIsAsIfItHadNeverBeenTaken() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let ana = try await store.create(Person(name: "Ana"))
        let bea = try await store.create(Person(name: "Bea"))
        let out = try #require(try await store.takePushBatch(limit: 1))
        let ahead = try #require(try await store.takePushBatch(after: out, limit: 10))
        #expect(ahead.entries.map(\.seq) == [2])
        #expect(try await store.get(Person.self, bea)?.syncState == .sending)

        await store.giveBack(ahead)
        let waiting = try await store.outboxEntries()
        #expect(waiting.map(\.seq) == [1, nil], "the seq no server saw is withdrawn")
        #expect(waiting.map(\.attempts) == [0, 0], "a batch never sent is no attempt")
        #expect(try await store.get(Person.self, bea)?.syncState == .pending)
        #expect(try await store.outboxSummary().sending == 1, "only the batch on the wire is sending")

        try await store.release(out, failure: .notSent("offline"))
        #expect(try await store.get(Person.self, ana)?.syncState == .pending, "a released batch is no longer sending")
        let again = try #require(try await store.takePushBatch())
        #expect(again.entries.map(\.record.uuid) == [ana, bea])
        #expect(again.entries.map(\.seq) == [1, 2], "the same numbers, in the same order")
    }

    /// A device with six captures queued, pushing two at a time (waiting
    /// `bodyOutWait` for a push's body before settling the answer before it,
    /// when given).
    static func sixCapturesInPushesOfTwo(bodyOutWait: Duration? = nil) async throws -> (SyncHarness, SyncHarness.Device, [UUID]) {
        let harness = try SyncHarness()
        var options = SyncOptions()
        options.pushBatchSize = 2
        if let bodyOutWait { options.bodyOutWait = bodyOutWait }
        let device = try harness.device("u-1", options: options)
        var made: [UUID] = []
        for index in 0..<6 { made.append(try await device.store.create(Person(name: "P\(index)"))) }
        return (harness, device, made)
    }

    /// The seqs of every push that reached the server, in order.
    static func pushedSeqs(_ device: SyncHarness.Device) throws -> [[Int64]] {
        try device.network.delivered(to: "/v1/push").map { request in
            try WireCoding.decode(PushRequest.self, from: request.body ?? Data()).mutations.map(\.seq)
        }
    }

    @Test func aPushThatFailsGivesBackTheBatchBehindItAndTheNextSyncSendsBothInOrder() async throws {
        let (harness, device, made) = try await Self.sixCapturesInPushesOfTwo()
        // The first push is cut after the server processed it; the batch
        // taken behind it must not go, nor count as an attempt.
        device.network.inject(.dropResponse) { $0.target.hasPrefix("/v1/push") }
        await #expect(throws: SyncFailure.self) { try await device.engine.sync() }
        let waiting = try await device.store.outboxEntries()
        #expect(waiting.count == 6)
        #expect(waiting.prefix(2).allSatisfy { $0.seq != nil && $0.attempts == 1 }, "the cut push: outcome unknown")
        #expect(waiting.dropFirst(2).allSatisfy { $0.seq == nil && $0.attempts == 0 }, "nothing behind it went out")
        #expect(device.network.delivered(to: "/v1/push").count == 1)

        _ = try await device.engine.sync()
        #expect(try await device.store.outboxEntries().isEmpty)
        #expect(Set(try harness.serverRecords().map(\.uuid)) == Set(made.map(\.wireText)))
        // Every push after the cut went out only once the one before was answered, seqs rising.
        let seqs = try Self.pushedSeqs(device)
        #expect(seqs == [[1, 2], [1, 2], [3, 4], [5, 6]])
    }

    /// The push behind an answered one goes before the answer is read. When
    /// the answer turns out unreadable, that push is already out: both
    /// batches' outcomes are unknown, both are resent with their seqs, and
    /// every change is on the server once.
    @Test func anAnswerCutShortLeavesTheBatchSentBehindItToBeResentAndNothingTwice() async throws {
        let device = try await Self.bothPushesOutWhenTheFirstAnswerMeets(.truncateResponse) { _, waiting in
            #expect(waiting.prefix(4).allSatisfy { $0.seq != nil }, "both pushes that went out keep their seqs")
        }
        let seqs = try Self.pushedSeqs(device)
        #expect(seqs.prefix(2) == [[1, 2], [3, 4]], "the second push went as soon as the first was answered")
    }

    /// The push behind goes on the answer's head (status 200), before the
    /// body: when the connection dies between the two, that push is out and
    /// the first one's outcome unknown. Neither is given back (its seqs
    /// reached the server): both are resent with their seqs.
    @Test func anAnswerCutAfterItsHeadLeavesTheBatchSentOnItToBeResentAndNothingTwice() async throws {
        let device = try await Self.bothPushesOutWhenTheFirstAnswerMeets(.cutAfterHead) { device, waiting in
            #expect(device.network.delivered(to: "/v1/push").count == 2, "the second push went on the first one's head")
            #expect(waiting.prefix(4).map(\.seq) == [1, 2, 3, 4], "both pushes that went out keep their seqs")
        }
        #expect(try Self.pushedSeqs(device).prefix(4) == [[1, 2], [3, 4], [1, 2], [3, 4]])
    }

    /// Six captures in pushes of two; the first push's answer meets `fault`
    /// after the second push went out. Checks what both tests above share:
    /// the failed sync settles nothing and leaves the third batch untaken,
    /// the server applied both pushes, and the next sync resends them (answered
    /// `duplicate`) and ends with every change on the server once.
    /// `afterTheFault` checks the queue left by the failed sync.
    static func bothPushesOutWhenTheFirstAnswerMeets(
        _ fault: FaultInjectingTransport.Fault,
        afterTheFault: (SyncHarness.Device, [OutboxEntry]) throws -> Void
    ) async throws -> SyncHarness.Device {
        let (harness, device, made) = try await sixCapturesInPushesOfTwo()
        device.network.inject(fault) { $0.target.hasPrefix("/v1/push") }
        await #expect(throws: SyncFailure.self) { try await device.engine.sync() }
        let waiting = try await device.store.outboxEntries()
        #expect(waiting.count == 6, "nothing settled from an answer that never came whole")
        try afterTheFault(device, waiting)
        #expect(waiting.dropFirst(4).allSatisfy { $0.seq == nil && $0.attempts == 0 })
        #expect(try harness.serverRecords().count == 4, "the server applied both pushes")

        let report = try await device.engine.sync()
        #expect(report.duplicates == 4, "the two pushes resent were answered with their first results")
        #expect(try await device.store.outboxEntries().isEmpty)
        let records = try harness.serverRecords()
        #expect(records.count == 6 && Set(records.map(\.uuid)) == Set(made.map(\.wireText)), "every change once")
        return device
    }

    /// The answer to a push is read and settled only once the push sent on
    /// its head is out: on a device with one core to spare, that work took
    /// the core from the thread sending the next push, which reached the
    /// server milliseconds late while the server sat idle. Slow uploads
    /// delay the settling, never the pushes.
    @Test func anAnswerIsSettledOnlyOnceThePushBehindItIsOut() async throws {
        let (harness, device, made) = try await Self.sixCapturesInPushesOfTwo(bodyOutWait: .seconds(60))
        let upload = Self.slowSecondPushBody(device)
        let sync = Task { try await device.engine.sync() }
        try await upload.waitForArrivals(1)
        // The first push was answered (the second goes on its head); an
        // engine that did not wait would settle it in well under this.
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await device.store.get(Person.self, made[0])?.syncState == .sending, "answered, not yet settled")
        #expect(try await device.store.outboxEntries().count == 6)
        #expect(try harness.serverRecords().count == 2, "the second push has not reached the server")

        upload.open()
        let report = try await sync.value
        #expect(report.confirmed == 6)
        #expect(try await device.store.outboxEntries().isEmpty)
        #expect(try Self.pushedSeqs(device) == [[1, 2], [3, 4], [5, 6]])
        #expect(Set(try harness.serverRecords().map(\.uuid)) == Set(made.map(\.wireText)))
    }

    /// Holds the body of the device's second push (the one sent on the
    /// first's head) on its way until the returned gate opens.
    static func slowSecondPushBody(_ device: SyncHarness.Device) -> FaultInjectingTransport.Gate {
        let upload = FaultInjectingTransport.Gate()
        let pushes = Locked(0)
        device.network.inject(.slowBody(upload)) { request in
            request.target.hasPrefix("/v1/push") && pushes.withLock { count in
                count += 1
                return count == 2
            }
        }
        return upload
    }

    /// The wait is short: an upload slower than reading and settling an
    /// answer takes (the network, not the core, is then what it waits for)
    /// does not hold the answer's settling back with it.
    @Test func aSlowUploadDoesNotHoldBackTheSettlingOfTheAnswerBeforeIt() async throws {
        let (harness, device, made) = try await Self.sixCapturesInPushesOfTwo()
        let upload = Self.slowSecondPushBody(device)
        let sync = Task { try await device.engine.sync() }
        try await upload.waitForArrivals(1)
        try await awaitBounded("the first push settled while the second's body is still going", within: .seconds(10)) {
            while try await device.store.get(Person.self, made[0])?.syncState != .synced { try await Task.sleep(for: .milliseconds(5)) }
        }
        #expect(try harness.serverRecords().count == 2, "the second push has not reached the server")
        upload.open()
        #expect(try await sync.value.confirmed == 6)
        #expect(Set(try harness.serverRecords().map(\.uuid)) == Set(made.map(\.wireText)))
    }

    /// A head that is not 200 (a refusal, a busy server) sends nothing on
    /// it: the batch behind is given back, as if never taken.
    @Test func aRefusingHeadSendsNothingBehindIt() async throws {
        let (harness, device, made) = try await Self.sixCapturesInPushesOfTwo()
        device.network.inject(.status(503, retryAfter: nil)) { $0.target.hasPrefix("/v1/push") }
        await #expect(throws: SyncFailure.self) { try await device.engine.sync() }
        #expect(device.network.delivered(to: "/v1/push").isEmpty, "the refused push never reached the server")
        let waiting = try await device.store.outboxEntries()
        #expect(waiting.dropFirst(2).allSatisfy { $0.seq == nil && $0.attempts == 0 }, "nothing behind it went out")

        _ = try await device.engine.sync()
        #expect(try await device.store.outboxEntries().isEmpty)
        #expect(Set(try harness.serverRecords().map(\.uuid)) == Set(made.map(\.wireText)))
    }
}
