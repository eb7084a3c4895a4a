import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Idle and half-sent sockets from one address (slowloris) must not take the
/// server from everyone else. The flood comes from 127.0.0.2, legitimate
/// requests from 127.0.0.1; small configured limits keep the test fast.
@Suite("Connection flood from one address", .serialized, .timeLimit(.minutes(2)))
struct ConnectionFloodTests {
    static let floodSize = 80

    // Each scenario runs on a thread of its own: its timing must not wait on
    // the cooperative pool, which other tests may hold for seconds.

    @Test func aFloodThatFillsTheTotalLosesItsOldestSocketsToOthers() async throws {
        // Only a total cap (the address's share is as large), and a long idle
        // timeout: the flood fills the total, yet the oldest half-sent socket
        // is cut for each newcomer (once, every slot stayed taken).
        let live = try LiveServer.sqlite(total: 64, perAddress: 64, idleTimeoutSeconds: 30)
        let port = live.http.port
        let http = live.http
        let (held, answered) = try await RawHTTP.onThread {
            let flood = try HeaderFlood(port: port, sources: ["127.0.0.2"], halfSent: Self.floodSize)
            defer { flood.close() }
            let held = Self.waitUntil(http, holds: 64)
            return (held, Self.legitimateRequests(port: port, count: 3, timeoutSeconds: 1))
        }
        print("ConnectionFlood[total cap only]: the flood holds \(held) connections; \(answered.count) of 3 legitimate requests answered within 1 s")
        #expect(held >= 64)
        #expect(answered.count == 3, "\(answered.count) of 3 requests answered past a flood holding the total")
    }

    @Test func withAPerAddressCapOthersAreServedPromptlyAndSilentSocketsAreClosed() async throws {
        let live = try LiveServer.sqlite(total: 64, perAddress: 16, idleTimeoutSeconds: 3)
        let port = live.http.port
        let http = live.http
        let (held, answered, closed) = try await RawHTTP.onThread {
            let flood = try HeaderFlood(port: port, sources: ["127.0.0.2"], halfSent: Self.floodSize)
            defer { flood.close() }
            let held = Self.waitUntil(http, holds: 16)
            let answered = Self.legitimateRequests(port: port, count: 20, timeoutSeconds: 1)
            // Past the per-address cap the server closes the flood's sockets
            // at once; the rest, silent, after the idle timeout.
            return (held, answered, flood.closedByServer(within: .seconds(15)))
        }
        let slowest = answered.max() ?? .zero
        print("ConnectionFlood[per-address cap 16]: the flood holds \(held) connections; \(answered.count) of 20 legitimate requests answered, slowest \(slowest); \(closed.count) flood sockets closed by the server")
        #expect(held >= 16)
        #expect(answered.count == 20)
        #expect(slowest < .milliseconds(500))
        #expect(closed.count == Self.floodSize, "\(closed.count) of \(Self.floodSize) half-sent sockets closed by the server")
        #expect(closed.filter { $0 < .seconds(3) }.count >= Self.floodSize - 16)
    }

    /// Waits (at most 10 s) until the server holds `count` connections, then
    /// a moment more for refusals past the per-address cap; returns how many it holds.
    static func waitUntil(_ http: HTTPServer, holds count: Int) -> Int {
        let deadline = ContinuousClock.now + .seconds(10)
        while http.openConnections < count && ContinuousClock.now < deadline { usleep(20_000) }
        usleep(200_000)
        return http.openConnections
    }

    /// Answer times of `count` health requests from 127.0.0.1, one after another; only those answered 200.
    static func legitimateRequests(port: UInt16, count: Int, timeoutSeconds: Int) -> [Duration] {
        var times: [Duration] = []
        for _ in 0..<count {
            let started = ContinuousClock.now
            let request = Array("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
            if let reply = try? HostileSocket.exchange(port: port, request: request, timeoutSeconds: timeoutSeconds),
                reply.status == 200
            {
                times.append(ContinuousClock.now - started)
            }
        }
        return times
    }
}
