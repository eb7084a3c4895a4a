import Foundation
import Outpost
import OutpostSimulation
import OutpostTesting
import Testing

/// A server that refuses connections for a moment (a proxy restarting, a
/// server being replaced) must not leave the live channel off until the
/// next periodic sync, minutes later: the channel comes back on its own
/// backoff with full jitter.
@Suite("Live channel after a refused connection", .timeLimit(.minutes(3)))
struct LiveReconnectionTests {
    @Test func aProxyRefusingForTwoSecondsLeavesTheChannelConnectingAndItComesBackLive() async throws {
        let rig = try await LiveSyncRig(heartbeatSeconds: 1)
        // A port below the kernel's range for port 0, so that while it is
        // closed no other test's proxy (nginx asked for a free port) is
        // handed it.
        var proxy = try Self.proxyOutsideTheEphemeralRange(to: rig.http.port)
        let port = proxy.port
        try await waitUntilServing(proxy.url)
        var options = SyncOptions()
        options.liveHeartbeat = .seconds(1)
        // Far away: a channel that waited for the periodic sync would never come back in this test.
        options.periodicInterval = .seconds(600)
        options.periodicIntervalWhileLive = .seconds(600)
        options.retry = RetryPolicy(base: .milliseconds(200), cap: .seconds(1))
        let device = try rig.device("c-1", name: "coordinator", role: .coordinator, options: options, via: proxy.url)
        let worker = try rig.device("u-1", name: "worker")
        await device.engine.start()
        try await eventually("live through the proxy", timeout: LiveSyncTests.firstLive) {
            await device.engine.currentStatus.live == .live
        }
        let liveStreams = device.transport.streamsOpened

        // The proxy goes away: its listener closes, so every new connection is refused.
        proxy.stop()
        try await eventually("the channel noticed the proxy is gone", timeout: .seconds(10)) {
            await device.engine.currentStatus.live != .live
        }
        var sawOff = false
        let refusedUntil = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < refusedUntil {
            if await device.engine.currentStatus.live == .off { sawOff = true }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(!sawOff, "while connections are refused the channel keeps trying: connecting, never off")
        #expect(await device.engine.currentStatus.live == .connecting, "still trying when the proxy returns")

        proxy = try await Self.reopen(port, to: rig.http.port)
        defer { proxy.stop() }
        let back = ContinuousClock.now
        try await eventually("live again once the proxy is back", timeout: .seconds(30)) {
            await device.engine.currentStatus.live == .live && device.transport.streamsOpened > liveStreams
        }
        // The backoff is capped at 1 s here, plus a reconnection's sync: a
        // loaded machine fits that in well under 15 s, never 10 minutes.
        #expect(ContinuousClock.now - back < .seconds(15))
        let id = try await worker.store.create(Person(name: "After the restart"))
        try await worker.engine.sync()
        try await eventually("a change arrives on the new channel") { try await device.store.get(Person.self, id) != nil }
        await device.engine.stop()
    }

    static func proxyOutsideTheEphemeralRange(to upstream: UInt16) throws -> ChaosProxy {
        var lastError: (any Error)?
        for _ in 0..<50 {
            do {
                return try ChaosProxy(upstreamPort: upstream, port: UInt16.random(in: 20_000..<32_000))
            } catch {
                lastError = error
            }
        }
        throw lastError!
    }

    /// The proxy again on its port; the old one's closed sockets may hold
    /// the port for a moment on a loaded machine.
    static func reopen(_ port: UInt16, to upstream: UInt16) async throws -> ChaosProxy {
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            do {
                return try ChaosProxy(upstreamPort: upstream, port: port)
            } catch where ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }
}
