import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting
import Testing

/// The scenarios of the list not covered elsewhere: a network switch in
/// the middle of a request, a reinstall, and a name lookup answering late.
@Suite("Network switch, reinstall, late DNS", .timeLimit(.minutes(5)))
struct NetworkSwitchTests {
    @Test func wifiToMobileSwitchMidRequestSendsTheCaptureOnce() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        await device.engine.receive(PathHint(isConnected: true, isExpensive: false))
        try await device.store.create(Person(name: "Ana"))
        // The push reaches the server over Wi-Fi; the phone moves to mobile
        // data before the answer, and the old connection dies with it.
        device.network.inject(.dropResponse) { $0.target.hasPrefix("/v1/push") }
        await #expect(throws: SyncFailure.noAnswer) { try await device.engine.sync() }
        await device.engine.receive(PathHint(isConnected: true, isExpensive: true))
        let report = try await device.engine.sync()
        #expect(report.duplicates == 1)
        #expect(try harness.serverRecords().count == 1)
        #expect(await device.engine.currentStatus.connectivity == .online)
    }

    @Test func reinstallDownloadsTheScopeAgainUnderANewClient() async throws {
        let harness = try SyncHarness()
        let first = try harness.device("u-1", name: "before-reinstall")
        let id = try await first.store.create(Person(name: "Ana"))
        try await first.engine.sync()
        let oldClient = first.store.clientID
        try await first.engine.signOut(unsentChanges: .discard)
        #expect(try await first.store.query(Person.self).isEmpty, "the signed-out store is empty")

        let reinstalled = try harness.device("u-1", name: "after-reinstall")
        #expect(reinstalled.store.clientID != oldClient, "a new install is a new client")
        try await reinstalled.engine.sync()
        #expect(try await reinstalled.store.get(Person.self, id)?.value.name == "Ana", "the person's data comes back")
        try await reinstalled.store.create(Person(name: "Bea"))
        try await reinstalled.engine.sync()
        #expect(try harness.serverRecords().count == 2, "the new client's seqs never collide with the old one's")
    }

    @Test func dnsAnsweringLateIsSlowNotBroken() async throws {
        let harness = try SyncHarness()
        var options = SyncOptions()
        options.periodicInterval = nil
        options.requestTimeout = 10
        let device = try harness.device("u-1", options: options)
        try await device.store.create(Person(name: "Ana"))
        // The name takes 4 s to resolve: the request leaves late, then succeeds.
        device.network.inject(.delay(.seconds(4)))
        let seen = StateLog()
        // Every step the status takes is kept: a brief "degraded" (or
        // "offline") is seen however slow the reader is.
        let updates = await device.engine.statusUpdates(keeping: 1_000)
        let watcher = Task { for await status in updates { seen.add(status.connectivity) } }
        defer { watcher.cancel() }
        let sync = Task { try await device.engine.sync() }
        // Release exactly the 4 s delay: the sync's own 60 s timer sleeps on
        // the same clock and may register first.
        try await harness.clock.advanceOnceAsleep(for: .seconds(4))
        let report = try await sync.value(within: .seconds(30), "the sync behind a 4 s lookup finished")
        #expect(report.confirmed == 1)
        try await eventually("the slow answer was reported") { seen.all.contains(.degraded) }
        #expect(!seen.all.contains(.offline), "slow, and said so, never an error")
        #expect(await device.engine.currentStatus.connectivity == .online, "fast answers restore it")
        // A lookup that fails outright means the request never left: offline, nothing in doubt.
        #expect(URLSessionTransport.classify(URLError(.dnsLookupFailed)) == .notSent(URLError(.dnsLookupFailed).localizedDescription))
        #expect(URLSessionTransport.classify(URLError(.timedOut)) == .noAnswer(URLError(.timedOut).localizedDescription))
    }
}

/// Connectivity states seen in a status stream.
final class StateLog: @unchecked Sendable {
    // @unchecked Sendable: `states` is only touched while `lock` is held.
    private let lock = NSLock()
    private var states: [ConnectivityState] = []
    func add(_ state: ConnectivityState) { lock.withLock { states.append(state) } }
    var all: [ConnectivityState] { lock.withLock { states } }
}
