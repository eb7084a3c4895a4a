import Foundation
#if canImport(Glibc)
import Glibc
#endif
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
        var proxy = try await rig.chaosProxy()
        let port = proxy.port
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

        // The proxy goes away: its listener closes, so every new connection
        // is refused. A socket bound to the port without listening keeps it
        // from tests running beside this one (connections to it are refused too).
        proxy.stop()
        let placeholder = try PortPlaceholder(port: port)
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

        placeholder.release()
        proxy = try ChaosProxy(upstreamPort: rig.http.port, port: port)
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
}

private struct PlaceholderError: Error {}

/// A socket bound to a port of 127.0.0.1 that does not listen: the port
/// stays taken, and every connection to it is refused.
private final class PortPlaceholder {
    private var socketNumber: Int32

    init(port: UInt16) throws {
        socketNumber = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        // The proxy's closed connections linger in TIME_WAIT on this port.
        var yes: Int32 = 1
        setsockopt(socketNumber, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socketNumber, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard socketNumber >= 0, bound == 0 else {
            release()
            throw PlaceholderError()
        }
    }

    func release() {
        if socketNumber >= 0 { close(socketNumber) }
        socketNumber = -1
    }

    deinit { release() }
}
