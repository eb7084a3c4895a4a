import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// The answers libmicrohttpd gives by itself, before a request reaches the
/// sync logic, carry the protocol's JSON error body like every other.
@Suite("HTTP layer errors", .timeLimit(.minutes(2)))
struct HTTPLayerErrorTests {
    @Test func everyAnswerOfTheHTTPLayerIsTheJSONErrorBody() throws {
        let live = try LiveServer(.sqlite)
        let port = live.http.port
        let long = String(repeating: "a", count: 100_000)
        let cases: [(String, [UInt8], Int, ErrorCode)] = [
            ("URI too long", Array("GET /v1/health?x=\(long) HTTP/1.1\r\nHost: x\r\n\r\n".utf8), 414, .uriTooLong),
            ("headers too large", Array("GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: \(long)\r\n\r\n".utf8), 431, .headersTooLarge),
            (
                "many headers", Array(("GET /v1/health HTTP/1.1\r\nHost: x\r\n" + (0..<4000).map { "X-\($0): y\r\n" }.joined() + "\r\n").utf8),
                431, .headersTooLarge
            ),
            ("HTTP/2.5", Array("GET /v1/health HTTP/2.5\r\nHost: x\r\n\r\n".utf8), 505, .httpVersionNotSupported),
        ]
        for (label, request, status, code) in cases {
            let reply = try HostileSocket.exchange(port: port, request: request, timeoutSeconds: 10)
            let text = String(decoding: reply.body, as: UTF8.self)
            #expect(reply.status == status, "\(label): \(reply.status) \(text.prefix(200))")
            #expect(reply.headers["content-type"] == "application/json", "\(label): \(text.prefix(200))")
            let body = try? WireCoding.decode(ErrorBody.self, from: Data(reply.body))
            #expect(body?.code == code, "\(label): \(text.prefix(200))")
            #expect(body?.code.httpStatus == status)
            #expect(body?.message.isEmpty == false)
        }
        // A Content-Length it cannot read: libmicrohttpd 0.9.75 writes the
        // answer's header block twice here (its own state machine goes on
        // after the error), so only the first header block can be checked.
        let malformed = try HostileSocket.exchange(
            port: port, request: Array("POST /v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 12abc\r\n\r\n".utf8),
            timeoutSeconds: 10)
        #expect(malformed.status == 400)
        #expect(malformed.headers["content-type"] == "application/json")

        // The server's own error answers are left as they are.
        let missing = try HostileSocket.exchange(
            port: port, request: Array("GET /v1/nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
        #expect(missing.status == 404)
        #expect((try? WireCoding.decode(ErrorBody.self, from: Data(missing.body)))?.message == "There is no such endpoint.")
    }
}
