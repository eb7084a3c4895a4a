import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// Behind a proxy that terminates TLS the server speaks plain HTTP, yet the
/// browser reached the console over HTTPS: the cookie must stay `Secure`.
/// Only the trusted proxy's word counts, since any client can write the header.
@Suite("Console cookie behind a proxy", .timeLimit(.minutes(2)))
struct ConsoleCookieBehindProxyTests {
    /// The `Set-Cookie` of a sign-in sent over a real socket.
    func signInCookie(trusting proxy: String?, headers: [String]) async throws -> String {
        let directory = try TemporaryDirectory(prefix: "outpost-console-proxy")
        let server = try SyncServer(database: try SQLiteServerDatabase(path: directory.path("s.sqlite")), config: ServerConfig())
        let token = try server.tokens.issue(user: "boss", role: .admin, team: "hq", ttl: nil)
        let http = try HTTPServer(port: 0, log: { _ in }, trustedProxy: proxy, server: server)
        defer { http.stop() }
        let body = #"{"token": "\#(token)"}"#
        let request = "POST /admin/api/session HTTP/1.1\r\nHost: outpost\r\nContent-Type: application/json\r\n"
            + headers.map { $0 + "\r\n" }.joined()
            + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
        let reply = try await runBlocking { try HostileSocket.exchange(port: http.port, request: Array(request.utf8)) }
        #expect(reply.status == 200, "the sign-in itself must succeed: \(String(decoding: reply.body, as: UTF8.self))")
        return try #require(reply.headers["set-cookie"], "a Set-Cookie header among \(reply.headers.keys.sorted())")
    }

    @Test func theTrustedProxysHTTPSMakesTheCookieSecure() async throws {
        let cookie = try await signInCookie(trusting: "127.0.0.1", headers: ["X-Forwarded-Proto: https"])
        #expect(cookie.contains("; Secure"), "\(cookie)")
    }

    @Test func aProxyThatSaysHTTPLeavesItPlain() async throws {
        let cookie = try await signInCookie(trusting: "127.0.0.1", headers: ["X-Forwarded-Proto: http"])
        #expect(!cookie.contains("Secure"), "\(cookie)")
    }

    @Test func theHeaderFromAnyoneElseCountsForNothing() async throws {
        let untrusted = try await signInCookie(trusting: "192.0.2.1", headers: ["X-Forwarded-Proto: https"])
        #expect(!untrusted.contains("Secure"), "the peer is not the proxy: \(untrusted)")
        let noProxy = try await signInCookie(trusting: nil, headers: ["X-Forwarded-Proto: https"])
        #expect(!noProxy.contains("Secure"), "no proxy is trusted: \(noProxy)")
    }

    /// A proxy that appends its line after the client's own: the last one is the proxy's.
    @Test func theProxysOwnLineIsTheLast() async throws {
        let cookie = try await signInCookie(
            trusting: "127.0.0.1", headers: ["X-Forwarded-Proto: https", "X-Forwarded-Proto: http"])
        #expect(!cookie.contains("Secure"), "\(cookie)")
    }
}
