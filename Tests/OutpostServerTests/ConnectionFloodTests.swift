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
            let flood = try HalfSentFlood(port: port, from: "127.0.0.2", count: Self.floodSize)
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
            let flood = try HalfSentFlood(port: port, from: "127.0.0.2", count: Self.floodSize)
            defer { flood.close() }
            let held = Self.waitUntil(http, holds: 16)
            let answered = Self.legitimateRequests(port: port, count: 20, timeoutSeconds: 1)
            // Past the per-address cap the server closes the flood's sockets
            // at once; the rest, silent, after the idle timeout.
            return (held, answered, flood.closedByServer(within: 15))
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

/// Sockets from one source address that each send half a request's headers and then nothing.
final class HalfSentFlood {
    private var sockets: [Int32] = []
    private let opened = ContinuousClock.now

    init(port: UInt16, from source: String, count: Int) throws {
        for _ in 0..<count {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw HostileSocket.Failure(description: "socket() failed: errno \(errno)") }
            sockets.append(fd)
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            var remote = sockaddr_in()
            remote.sin_family = sa_family_t(AF_INET)
            remote.sin_port = port.bigEndian
            remote.sin_addr.s_addr = inet_addr("127.0.0.1")
            let size = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) } }
            guard bound == 0 else { throw HostileSocket.Failure(description: "bind(\(source)) failed: errno \(errno)") }
            let connected = withUnsafePointer(to: &remote) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, size) }
            }
            guard connected == 0 else { throw HostileSocket.Failure(description: "connect() failed: errno \(errno)") }
            let half = Array("POST /v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty".utf8)
            _ = half.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
    }

    /// How long after opening each socket the server closed it (EOF or reset); sockets still open after `seconds` are left out.
    func closedByServer(within seconds: Int) -> [Duration] {
        HostileSocket.closings(of: sockets, since: opened, until: opened + .seconds(seconds))
    }

    func close() {
        for fd in sockets { Glibc.close(fd) }
        sockets = []
    }

    deinit { close() }
}

extension HostileSocket {
    /// How long after `start` the server closed each of `sockets` (EOF or
    /// reset), watched until `deadline`; sockets still open then are left out.
    static func closings(of sockets: [Int32], since start: ContinuousClock.Instant, until deadline: ContinuousClock.Instant)
        -> [Duration]
    {
        var closed: [Duration] = []
        var open = sockets
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !open.isEmpty && ContinuousClock.now < deadline {
            var polled = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            _ = poll(&polled, nfds_t(polled.count), 100)
            var still: [Int32] = []
            for entry in polled {
                if entry.revents != 0 {
                    let count = buffer.withUnsafeMutableBytes { recv(entry.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                    if count <= 0 && !(count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                        closed.append(ContinuousClock.now - start)
                        continue
                    }
                }
                still.append(entry.fd)
            }
            open = still
        }
        return closed
    }
}
