import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A socket left open after its answer (HTTP keep-alive) serves the next
/// request of the same sync, which follows within milliseconds; after that
/// it only holds a slot of the connection limits. A device's stream, or
/// another device, must not wait for the idle timeout of someone's
/// finished sync.
@Suite("Kept-alive connections", .serialized, .timeLimit(.minutes(2)))
struct KeepAliveTests {
    @Test func socketsKeptAliveAfterTheirAnswersDoNotHoldTheSlotsOthersNeed() async throws {
        // A long idle timeout within requests, and room for 8 sockets only.
        let live = try LiveServer.sqlite(total: 8, perAddress: 8, idleTimeoutSeconds: 30)
        let port = live.http.port
        let http = live.http
        let outcome = try await RawHTTP.onThread { () throws -> (reused: Bool, others: [Duration], closed: [Duration]) in
            // Eight syncs, each answered and its socket kept open.
            let kept = try (0..<8).map { _ in try KeptAliveSocket(port: port) }
            defer { kept.forEach { $0.close() } }
            for socket in kept { try socket.ask() }
            // The next request of the same sync reuses its socket.
            usleep(300_000)
            let reused = (try? kept[0].ask()) != nil
            let held = http.openConnections
            // Others: each must be answered long before the 30 s idle timeout frees a slot.
            let others = ConnectionFloodTests.legitimateRequests(port: port, count: 3, timeoutSeconds: 8)
            let closed = RawSocket.closings(of: kept.map(\.fd), since: .now, until: .now + .seconds(10))
            print("KeepAlive: \(held) sockets held after 8 answers; others answered in \(others); kept sockets closed after \(closed)")
            return (reused, others, closed)
        }
        #expect(outcome.reused, "a socket is still there for the next request of the same sync")
        #expect(outcome.others.count == 3, "\(outcome.others.count) of 3 other requests answered within 8 s")
        #expect((outcome.others.max() ?? .seconds(99)) < .seconds(5))
        #expect(outcome.closed.count == 8, "\(outcome.closed.count) of 8 idle sockets closed by the server")
    }

    /// While the limits have room, an answered connection waits its idle
    /// timeout for the next request: a server that closed it after 2 s
    /// raced the clients' next requests on it, and Foundation on Linux sent
    /// a push that met the closing socket again without its body, then
    /// waited for an answer until its timeout.
    @Test func aQuietServerKeepsAnAnsweredConnectionForItsIdleTimeout() async throws {
        let live = try LiveServer.sqlite(total: 64, perAddress: 64, idleTimeoutSeconds: 30)
        let port = live.http.port
        let http = live.http
        let outcome = try await RawHTTP.onThread { () throws -> (reused: Bool, counted: Int) in
            let socket = try KeptAliveSocket(port: port)
            try socket.ask()
            sleep(UInt32(HTTPServer.keepAliveSeconds) + 2)
            let reused = (try? socket.ask()) != nil
            let counted = http.gate.openConnections
            socket.close()
            return (reused, counted)
        }
        #expect(outcome.reused, "an answered connection of a quiet server was closed after \(HTTPServer.keepAliveSeconds) s")
        #expect(outcome.counted == 1)
        try await eventually("the closed connection is no longer counted", timeout: .seconds(10)) {
            live.http.gate.openConnections == 0
        }
    }

    @Test func aRequestWhoseBodyPausesLongerThanTheKeepAliveIsStillServed() async throws {
        // Within a request the configured idle timeout holds, not the
        // short wait between requests: a phone's upload may stall a while.
        let live = try LiveServer.sqlite(total: 64, perAddress: 64, idleTimeoutSeconds: 30)
        let port = live.http.port
        let token = try live.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)
        let status = try await RawHTTP.onThread { () throws -> Int in
            let socket = try KeptAliveSocket(port: port)
            defer { socket.close() }
            try socket.ask()
            let body = Array(#"{"client_id":"8f0c2a4e-4b7e-4d5c-9a41-3c9d2f6b7e10","mutations":[]}"#.utf8)
            let head = "POST /v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
                + "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n"
            HostileSocket.sendAll(socket.fd, Array(head.utf8) + body.prefix(10))
            sleep(4)
            HostileSocket.sendAll(socket.fd, Array(body.dropFirst(10)))
            return try socket.readAnswer().status
        }
        #expect(status == 200)
    }
}

/// One HTTP/1.1 connection that asks `GET /v1/health` and keeps the socket open.
final class KeptAliveSocket {
    let fd: Int32
    private var pending: [UInt8] = []

    init(port: UInt16) throws { fd = try HostileSocket.connected(port: port, timeoutSeconds: 10) }

    func ask() throws {
        HostileSocket.sendAll(fd, Array("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        let reply = try readAnswer()
        guard reply.status == 200 else { throw HostileSocket.Failure(description: "health answered \(reply.status)") }
    }

    /// Reads one answer with a `Content-Length` body.
    func readAnswer() throws -> HostileSocket.Reply {
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            if let end = HostileSocket.find([13, 10, 13, 10], in: pending[...]) {
                let head = String(decoding: pending[..<end], as: UTF8.self).lowercased()
                let length = head.components(separatedBy: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                if pending.count >= end + 4 + length {
                    let reply = try HostileSocket.parse(Array(pending[..<(end + 4 + length)]))
                    pending.removeFirst(end + 4 + length)
                    return reply
                }
            }
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else {
                throw HostileSocket.Failure(description: "the connection ended before an answer (errno \(errno))")
            }
            pending += chunk[0..<count]
        }
    }

    func close() { Glibc.close(fd) }
}
