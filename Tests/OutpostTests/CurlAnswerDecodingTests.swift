#if canImport(Glibc)
import Foundation
import Glibc
@testable import Outpost
import OutpostCore
import Testing

/// Whole answers come from libcurl as they were sent and are inflated by
/// the transport (libdeflate, on the caller's thread): both codings, a body
/// that does not decode and one that would inflate past the bound are clear
/// transport errors, and nothing of them is handed on.
@Suite("CurlTransport decoding whole answers", .timeLimit(.minutes(2)))
struct CurlAnswerDecodingTests {
    static let text = Data(String(repeating: #"{"name":"Ana","visits":[1,2,3]},"#, count: 500).utf8)

    /// A server answering every request with `body` under `coding`.
    static func serving(_ body: Data, coding: String) throws -> RawHTTPServer {
        try RawHTTPServer { connection in
            connection.write(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: \(coding)\r\nContent-Length: \(body.count)\r\n\r\n")
            connection.write(body)
        }
    }

    static func get(_ server: RawHTTPServer, limit: Int = CurlTransport.defaultDecodedLimit) async throws -> TransportResponse {
        try await CurlTransport(baseURL: server.base, decodedLimit: limit).send(TransportRequest(method: "GET", target: "/v1/pull", timeout: 10))
    }

    static func failure(_ server: RawHTTPServer, limit: Int = CurlTransport.defaultDecodedLimit) async -> TransportError? {
        do {
            _ = try await get(server, limit: limit)
            return nil
        } catch {
            return error as? TransportError
        }
    }

    static func compressed(_ body: Data, _ format: DeflateFormat) throws -> Data {
        let stream = try #require(DeflateStream(format: format, level: 6))
        return Data(body.withUnsafeBytes { stream.compress($0) })
    }

    @Test func gzipAndDeflateAnswersAreHandedOverInflated() async throws {
        for format in DeflateFormat.allCases {
            let server = try Self.serving(try Self.compressed(Self.text, format), coding: format.rawValue)
            let response = try await Self.get(server)
            #expect(response.status == 200)
            #expect(response.body == Self.text, "\(format)")
        }
    }

    @Test func aBodyThatDoesNotInflateIsATransportError() async throws {
        var broken = try Self.compressed(Self.text, .gzip)
        broken[broken.count / 2] ^= 0xFF
        let failure = await Self.failure(try Self.serving(broken, coding: "gzip"))
        #expect(failure == .noAnswer("the answer's body is not valid gzip"))
        let plain = await Self.failure(try Self.serving(Self.text, coding: "deflate"))
        #expect(plain == .noAnswer("the answer's body is not valid deflate"))
    }

    @Test func aBodyInflatingPastTheBoundIsRefused() async throws {
        let bomb = try Self.compressed(Data(count: 32 << 20), .gzip)
        let failure = await Self.failure(try Self.serving(bomb, coding: "gzip"), limit: 1 << 20)
        #expect(failure == .noAnswer("the answer (gzip) inflates to more than 1048576 bytes"))
        let zlib = try Self.compressed(Data(count: 32 << 20), .deflate)
        let deflateFailure = await Self.failure(try Self.serving(zlib, coding: "deflate"), limit: 1 << 20)
        #expect(deflateFailure == .noAnswer("the answer (deflate) inflates to more than 1048576 bytes"))
        // The same answers under a bound they fit.
        #expect(try await Self.get(try Self.serving(bomb, coding: "gzip"), limit: 64 << 20).body.count == 32 << 20)
    }
}
#endif
