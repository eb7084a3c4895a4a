import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting
import Testing

/// The sync engine against the real server's request handling, with faults
/// injected in the transport.
@Suite("Sync engine", .timeLimit(.minutes(5)))
struct SyncEngineTests {
    @Test func startWithNoNetworkCapturesThenSendsOnceWhenBack() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        device.network.isOffline = true
        #expect(await device.engine.currentStatus.connectivity == .unknown, "startup uncertainty is not an error")
        let id = try await device.store.create(Person(name: "Ana"))
        await #expect(throws: SyncFailure.offline) { try await device.engine.sync() }
        let status = await device.engine.currentStatus
        #expect(status.connectivity == .offline)
        #expect(status.pending == 1)
        #expect(
            StatusMessage.text(for: status)
                == "You're offline. Nothing has been downloaded yet, but you can capture new records; your change will be sent when you're back online.")
        #expect(try await device.store.get(Person.self, id)?.syncState == .pending, "a failed sync never removes a record")

        device.network.isOffline = false
        let report = try await device.engine.sync()
        #expect(report.confirmed == 1)
        #expect(try harness.serverRecords().count == 1)
        #expect(try await device.store.get(Person.self, id)?.syncState == .synced)
        #expect(await device.engine.currentStatus.connectivity == .online)
    }

    @Test func connectedButNoInternetIsDegradedNotOffline() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        await device.engine.receive(PathHint(isConnected: true, isInternetReachable: nil))
        device.network.isOffline = true  // Wi-Fi with bars, reaching nothing.
        try await device.store.create(Person(name: "Ana"))
        await #expect(throws: SyncFailure.offline) { try await device.engine.sync() }
        let status = await device.engine.currentStatus
        #expect(status.connectivity == .degraded)
        #expect(StatusMessage.text(for: status) == "The connection is slow. Your change is not confirmed yet.")
    }

    @Test func networkLostDuringAnEditKeepsTheEditAndSendsItLater() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        let id = try await device.store.create(Person(name: "Ana"))
        try await device.engine.sync()
        await device.engine.receive(PathHint(isConnected: false))
        device.network.isOffline = true
        try await device.store.update(Person.self, id) { $0.phone = "555" }
        #expect(await device.engine.currentStatus.connectivity == .offline)
        device.network.isOffline = false
        try await device.engine.sync()
        #expect(try harness.serverRecords().first?.data?.contains("555") == true)
    }

    @Test func aTimeoutLeavesTheChangeCheckingAndTheResendIsADuplicate() async throws {
        let harness = try SyncHarness()
        var options = SyncOptions()
        options.periodicInterval = nil
        options.requestTimeout = 2
        let device = try harness.device("u-1", options: options)
        let id = try await device.store.create(Person(name: "Ana"))
        // The server applies the insert, then the network is too slow to answer in time.
        device.network.inject(.delay(.seconds(30))) { $0.target.hasPrefix("/v1/push") }
        let attempt = Task { try await device.engine.sync() }
        // Release exactly the 2 s request timeout, not whichever sleep registered first.
        try await harness.clock.advanceOnceAsleep(for: .seconds(2))
        await #expect(throws: SyncFailure.noAnswer) { try await attempt.value(within: .seconds(30), "the timed-out push gave up") }
        #expect(try await device.store.outboxSummary().awaitingConfirmation == 1, "checking result, not a new mutation")
        #expect(try harness.serverRecords().count == 1)

        let report = try await device.engine.sync()
        #expect(report.duplicates == 1)
        #expect(try harness.serverRecords().count == 1, "inserted once")
        #expect(try await device.store.get(Person.self, id)?.syncState == .synced)
        let pushes = device.network.delivered(to: "/v1/push")
        #expect(pushes.count == 2)
        #expect(pushes[0].body == pushes[1].body, "the resend carries the same seq and content")
    }

    @Test func insertConfirmedButResponseLost() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        try await device.store.create(Person(name: "Ana"))
        device.network.inject(.dropResponse) { $0.target.hasPrefix("/v1/push") }
        await #expect(throws: SyncFailure.noAnswer) { try await device.engine.sync() }
        try await device.engine.sync()
        #expect(try harness.serverRecords().count == 1)
        #expect(try await device.store.outboxEntries().isEmpty)
    }

    @Test func doubleTapDuringASlowRequestSendsEachMutationOnce() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        try await device.store.create(Person(name: "Ana"))
        try await device.store.create(Person(name: "Bea"))
        let gate = FaultInjectingTransport.Gate()
        device.network.inject(.hold(gate)) { $0.target.hasPrefix("/v1/push") }
        let first = Task { try await device.engine.sync() }
        try await gate.waitForArrivals()
        // Second tap, and a reconnect trigger, while the first push is in flight.
        let second = Task { try await device.engine.sync() }
        await device.engine.trigger(.connectivityRegained)
        gate.open()
        _ = try await first.value(within: .seconds(30), "the first tap's sync finished")
        _ = try await second.value(within: .seconds(30), "the second tap's sync finished")
        let pushes = device.network.delivered(to: "/v1/push")
        let mutations = try pushes.flatMap { try WireCoding.decode(PushRequest.self, from: $0.body ?? Data()).mutations }
        #expect(mutations.count == 2, "each mutation sent exactly once")
        #expect(Set(mutations.map(\.seq)).count == 2)
        #expect(try harness.serverRecords().count == 2)
    }

    @Test func twoTriggersAtOnceSendEachMutationExactlyOnce() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        for index in 0..<20 { try await device.store.create(Person(name: "P\(index)")) }
        async let reconnect: Void = device.engine.trigger(.connectivityRegained)
        async let refresh = device.engine.sync()
        _ = await reconnect
        _ = try await refresh
        try await device.engine.sync()
        let mutations = try device.network.delivered(to: "/v1/push").flatMap {
            try WireCoding.decode(PushRequest.self, from: $0.body ?? Data()).mutations
        }
        #expect(mutations.count == 20)
        #expect(try harness.serverRecords().count == 20)
    }

    @Test func tokenExpiredWhileOfflineKeepsCapturingAndCallsNoServer() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        try await device.engine.sync()
        harness.serverClock.advance(by: 1)
        // The token expires on the server.
        let expired = try harness.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: 1)
        await device.engine.updateToken(expired)
        harness.serverClock.advance(by: 5)
        let id = try await device.store.create(Person(name: "Ana"))
        await #expect(throws: SyncFailure.signInRequired) { try await device.engine.sync() }
        let status = await device.engine.currentStatus
        #expect(status.signInRequired)
        #expect(StatusMessage.text(for: status).hasPrefix("Your session has expired."))
        let calls = device.network.delivered.count
        try await device.store.update(Person.self, id) { $0.phone = "1" }
        await #expect(throws: SyncFailure.signInRequired) { try await device.engine.sync() }
        #expect(device.network.delivered.count == calls, "an expired token never authorises another server call")
        #expect(try await device.store.get(Person.self, id)?.value == Person(name: "Ana", phone: "1"), "nothing is lost")

        await device.engine.updateToken(try harness.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil))
        try await device.engine.sync()
        #expect(try harness.serverRecords().count == 1)
    }

    @Test func syncInterruptedHalfWayResumesFromTheLastPage() async throws {
        let harness = try SyncHarness()
        let writer = try harness.device("u-1", name: "writer")
        for index in 0..<50 { try await writer.store.create(Person(name: "P\(index)")) }
        try await writer.engine.sync()

        var options = SyncOptions()
        options.periodicInterval = nil
        options.pullPageSize = 10
        options.reconnectJitter = .zero
        let reader = try harness.device("u-1", name: "reader", options: options)
        reader.network.inject(.notSent) { $0.target.contains("cursor=") && $0.target.hasPrefix("/v1/pull") }
        await #expect(throws: SyncFailure.offline) { try await reader.engine.sync() }
        #expect(try await reader.store.catalog("visit_outcome").count + (try await reader.store.catalog("document_type").count) == 9)
        let firstPageKept = try await reader.store.localCounts().values.reduce(0, +)
        #expect(firstPageKept == 10, "the first page is kept")
        let report = try await reader.engine.sync()
        #expect(try await reader.store.query(Person.self).count == 50)
        #expect(report.received == 18 + 50 - 10, "only what was missing is downloaded")
        let pulls = reader.network.delivered(to: "/v1/pull")
        #expect(pulls.filter { !$0.target.contains("cursor=") }.count == 1, "not downloaded again from the start")
    }

    @Test func aRateLimitedDeviceWaitsAsToldThenSendsEverything() async throws {
        var config = try ServerConfig()
        config.rateLimit = try ServerConfig.RateLimit(perMinute: 6, burst: 3)
        let harness = try SyncHarness(config: config)
        let device = try harness.device("u-1")
        try await device.store.create(Person(name: "Ana"))
        try await device.engine.sync()  // the burst: a push, the scope, a pull
        #expect(device.network.delivered.count == 3)
        try await device.store.create(Person(name: "Bruno"))
        await #expect(throws: SyncFailure.serverBusy(retryAfter: 10)) { try await device.engine.sync() }
        let retryAt = try #require(await device.engine.nextRetryAt)
        #expect(retryAt >= .seconds(10), "Retry-After is honoured")
        #expect(try await device.store.outboxEntries().first?.failures == 0, "a 429 does not use up the retry budget")
        harness.serverClock.advance(by: 60)
        // Wake exactly the retry timer (it may not be asleep yet).
        try await harness.clock.advance(toSleeperAt: retryAt)
        try await eventually("the retry sent the capture") { try harness.serverRecords().count == 2 }
    }

    @Test func endpointFailingWhileTheServerIsUpBacksOffAsToldAndLosesNothing() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        let id = try await device.store.create(Person(name: "Ana"))
        device.network.inject(.status(503, retryAfter: 30)) { $0.target.hasPrefix("/v1/push") }
        await #expect(throws: SyncFailure.serverBusy(retryAfter: 30)) { try await device.engine.sync() }
        let retryAt = try #require(await device.engine.nextRetryAt)
        #expect(retryAt >= .seconds(30), "Retry-After is honoured")
        #expect(await device.engine.currentStatus.connectivity == .degraded)
        #expect(try await device.store.get(Person.self, id) != nil)
        let entry = try #require(try await device.store.outboxEntries().first)
        #expect(entry.failures == 0, "a 503 does not use up the retry budget")
        // An automatic trigger waits for the backoff; the timer then retries.
        await device.engine.trigger(.periodic)
        #expect(device.network.delivered(to: "/v1/push").isEmpty)
        try await harness.clock.advance(toSleeperAt: retryAt)
        try await eventually("the retry ran") { try harness.serverRecords().count == 1 }
    }

    @Test func manualSyncSkipsTheBackoffWait() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        try await device.store.create(Person(name: "Ana"))
        device.network.inject(.status(503, retryAfter: 600)) { $0.target.hasPrefix("/v1/push") }
        await #expect(throws: SyncFailure.serverBusy(retryAfter: 600)) { try await device.engine.sync() }
        try await device.engine.sync()
        #expect(try harness.serverRecords().count == 1)
    }

    /// A sync tried again after a busy server may find its change already
    /// sent by the engine's own retry in between, and its last cycle with
    /// nothing to send: the cycles since it began still say the change was
    /// sent and confirmed (`outpost sync` printed "sent 0, confirmed 0" so).
    @Test func theCyclesOfASyncTriedAgainSayWhatTheEnginesOwnRetrySent() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        try await device.store.create(Person(name: "Ana"))
        let mark = await device.engine.endedCycles
        device.network.inject(.status(503, retryAfter: 30)) { $0.target.hasPrefix("/v1/push") }
        await #expect(throws: SyncFailure.serverBusy(retryAfter: 30)) { try await device.engine.sync() }
        let retryAt = try #require(await device.engine.nextRetryAt)
        try await harness.clock.advance(toSleeperAt: retryAt)
        try await eventually("the engine's own retry ended") { await device.engine.endedCycles >= mark + 2 }
        #expect(try harness.serverRecords().count == 1)

        let last = try await device.engine.sync()
        #expect(last.sent == 0 && last.confirmed == 0, "the retry took the change: this cycle had nothing to send")
        let whole = try #require(await device.engine.reportOfCycles(after: mark))
        #expect(whole.sent == 1)
        #expect(whole.confirmed == 1)
        #expect(await device.engine.reportOfCycles(after: await device.engine.endedCycles) == nil, "no cycle ended since")
    }

    @Test func anOldResponseAfterANewSnapshotIsIgnored() async throws {
        let harness = try SyncHarness()
        let editor = try harness.device("u-1", name: "editor")
        let id = try await editor.store.create(Person(name: "Old name"))
        try await editor.engine.sync()

        let viewer = try harness.device("u-1", name: "viewer")
        // The viewer's first download hangs on a dying connection...
        let gate = FaultInjectingTransport.Gate()
        viewer.network.inject(.hold(gate)) { $0.target.hasPrefix("/v1/pull") }
        let stale = Task { try await viewer.engine.sync() }
        try await gate.waitForArrivals()
        // ...the record changes, the network comes back, a fresh cycle runs.
        try await editor.store.update(Person.self, id) { $0.name = "New name" }
        try await editor.engine.sync()
        await viewer.engine.receive(PathHint(isConnected: false))
        await viewer.engine.receive(PathHint(isConnected: true))
        try await eventually("the fresh cycle stored the new name") {
            try await viewer.store.get(Person.self, id)?.value.name == "New name"
        }
        // The old answer finally arrives: it must not overwrite fresher data.
        gate.open()
        _ = try? await stale.value(within: .seconds(30), "the stale cycle ended")
        #expect(try await viewer.store.get(Person.self, id)?.value.name == "New name")
    }

    @Test func createThenDeleteWhileTheInsertIsInFlight() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        let id = try await device.store.create(Person(name: "Ana"))
        let gate = FaultInjectingTransport.Gate()
        device.network.inject(.hold(gate)) { $0.target.hasPrefix("/v1/push") }
        let inFlight = Task { try await device.engine.sync() }
        try await gate.waitForArrivals()
        try await device.store.delete(Person.self, id)
        gate.open()
        _ = try await inFlight.value(within: .seconds(30), "the in-flight push settled")
        try await device.engine.sync()
        #expect(try harness.serverRecords().map(\.deleted) == [true], "the record does not come back")
        try await device.engine.sync()
        #expect(try await device.store.get(Person.self, id) == nil)
        #expect(try await device.store.outboxEntries().isEmpty)
    }

    @Test func twoPeopleEditTheSameRecordFromTheSameVersionOffline() async throws {
        let harness = try SyncHarness()
        let ana = try harness.device("u-1", team: "t-1", name: "ana")
        let id = try await ana.store.create(Person(name: "Shared"))
        try await ana.engine.sync()
        let boss = try harness.device("c-1", role: .coordinator, team: "t-1", name: "boss")
        try await boss.engine.sync()
        #expect(try await boss.store.get(Person.self, id) != nil)

        ana.network.isOffline = true
        boss.network.isOffline = true
        try await ana.store.update(Person.self, id) { $0.phone = "111" }
        try await boss.store.update(Person.self, id) { $0.phone = "222" }
        ana.network.isOffline = false
        boss.network.isOffline = false
        try await ana.engine.sync()
        let report = try await boss.engine.sync()
        #expect(report.conflicts.count == 1, "the overwritten edit is reported, never lost in silence")
        #expect(report.conflicts.first?.localChange == ["phone": "222"])
        #expect(try await boss.store.get(Person.self, id)?.value.phone == "111", "server copy prevails")
        #expect(await boss.engine.currentStatus.conflicts == 1)
    }

    @Test(arguments: [120.0, 2 * 86_400.0])
    func aDeviceClockAheadChangesNothing(_ offset: TimeInterval) async throws {
        let harness = try SyncHarness()
        let writer = try harness.device("u-1", name: "writer")
        let skewed = try harness.device("u-1", name: "skewed", deviceClockOffset: offset)
        try await skewed.engine.sync()
        let id = try await writer.store.create(Person(name: "Ana"))
        try await writer.engine.sync()
        try await skewed.engine.sync()
        #expect(try await skewed.store.get(Person.self, id) != nil, "a later change is still pulled")
        let status = await skewed.engine.currentStatus
        let synced = try #require(status.lastSyncedAt["people"]?.date)
        #expect(abs(synced.timeIntervalSince(harness.serverClock.now())) < 1, "last sync is server time")
        let own = try await skewed.store.create(Person(name: "Bea"))
        try await skewed.engine.sync()
        try await writer.engine.sync()
        #expect(try await writer.store.get(Person.self, own) != nil)
    }

    @Test func aParentAndItsChildrenCreatedOffline() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        device.network.isOffline = true
        let parent = try await device.store.create(Person(name: "Ana"))
        for hour in 9..<12 {
            try await device.store.create(
                Visit(person: parent.wireText, visitedAt: "2026-11-29T\(String(format: "%02d", hour)):00:00Z"))
        }
        device.network.isOffline = false
        let report = try await device.engine.sync()
        #expect(report.confirmed == 4)
        #expect(report.rejected.isEmpty)
        #expect(try harness.serverRecords("visits").count == 3)
    }

    @Test func resyncAfter410KeepsPendingChanges() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        let kept = try await device.store.create(Person(name: "Synced"))
        let gone = try await device.store.create(Person(name: "Deleted elsewhere"))
        try await device.engine.sync()
        let other = try harness.device("u-1", name: "other")
        try await other.engine.sync()
        try await other.store.delete(Person.self, gone)
        try await other.engine.sync()
        // The device stays away past the horizon; the tombstone is purged.
        harness.serverClock.advance(by: 91 * 86_400)
        try harness.server.runMaintenance()
        device.network.isOffline = true
        let pending = try await device.store.create(Person(name: "Captured offline"))
        device.network.isOffline = false
        try await device.engine.sync()
        #expect(try await device.store.get(Person.self, kept) != nil)
        #expect(try await device.store.get(Person.self, gone) == nil, "removed by the re-download, not resurrected")
        #expect(try await device.store.get(Person.self, pending)?.syncState == .synced)
        #expect(try harness.serverRecords().filter { !$0.deleted }.count == 2)
    }
}
