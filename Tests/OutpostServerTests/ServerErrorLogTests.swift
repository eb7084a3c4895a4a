import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Every 5xx leaves one JSON log line that names its cause, and never the
/// request's body or token.
@Suite("Server error log", .timeLimit(.minutes(2)))
struct ServerErrorLogTests {
    @Test func aFullDiskAnswers503AndLogsTheCause() async throws {
        let lines = LogLines()
        let live = try LiveServer(.sqlite, log: lines.append)
        let token = try live.token("f-1")
        // The disk is full: SQLite may not grow the file by a single page.
        _ = try live.database.write { try $0.query("PRAGMA max_page_count = 1", []) }
        let device = TestDevice()
        let secret = "private notes " + String(repeating: "x", count: 20_000)
        let body = try WireCoding.encode(device.request(device.mutation(.create, data: ["name": "Ana", "notes": .string(secret)])))
        let answer = try await live.send("POST", "/v1/push", token: token, body: body)
        #expect(answer.status == 503)
        #expect(answer.headers["retry-after"] != nil)
        #expect(!answer.text.contains("full"), "the answer must not carry the cause: \(answer.text)")

        let failures = lines.all.filter { $0.contains(#""status":503"#) }
        #expect(failures.count == 1)
        let line = try #require(failures.first)
        let object = try JSONObject.parseObject(line)
        #expect(object["cause"]?.stringValue?.contains("database or disk is full") == true, "\(line)")
        #expect(object["path"]?.stringValue == "/v1/push")
        #expect(object["request_id"]?.stringValue != nil)
        #expect(!line.contains(token) && !line.contains("private notes"))
        // Answers below 500 carry no cause.
        _ = try await live.get("/v1/health", token: nil)
        #expect(lines.all.filter { !$0.contains(#""status":503"#) }.allSatisfy { !$0.contains(#""cause""#) })
    }

    @Test func aTransientFailureLogsItsCause() async throws {
        let lines = LogLines()
        let live = try LiveServer(.sqlite, log: lines.append)
        let token = try live.token("f-1")
        live.server.hooks.beforePushCommit = { _ in
            throw DatabaseError(kind: .transient, message: "database is locked\nDETAIL: row (secret) was busy", sql: "UPDATE x SET y = ?")
        }
        let device = TestDevice()
        let answer = try await live.send(
            "POST", "/v1/push", token: token, body: try WireCoding.encode(device.request(device.mutation(.create, data: ["name": "Ana"]))))
        #expect(answer.status == 503)
        let line = try #require(lines.all.first { $0.contains(#""status":503"#) })
        #expect(line.contains("database is locked") && line.contains("UPDATE x SET y = ?"), "\(line)")
        #expect(!line.contains("secret"), "a DETAIL line can quote row values: \(line)")
    }

    /// One id ties an answer to its log line: the caller's `X-Request-Id`
    /// when usable (a proxy's, an app's), else one made here; error bodies
    /// carry it too, so whoever reports an error can quote it.
    @Test func theRequestIdIsHonouredOrMadeAndShownInTheLogAndEveryErrorBody() async throws {
        let lines = LogLines()
        let live = try LiveServer(.sqlite, log: lines.append)
        func send(_ target: String, id: String?) async throws -> LiveServer.Response {
            try await live.send("GET", target, contentType: nil, headers: id.map { ["X-Request-Id": $0] } ?? [:])
        }
        func logged(_ id: String) -> [String] { lines.all.filter { $0.contains(#""request_id":"\#(id)""#) } }

        let honoured = try await send("/v1/pull", id: "lb-7f3a:42")
        #expect(honoured.status == 401)
        #expect(honoured.headers["x-request-id"] == "lb-7f3a:42")
        #expect(honoured.error?.requestID == "lb-7f3a:42")
        #expect(honoured.error?.code == .unauthenticated)
        #expect(logged("lb-7f3a:42").count == 1)

        // Unusable ids (spaces, quotes, too long) are replaced, never echoed.
        for bad in [#"x" injected"#, String(repeating: "a", count: 129)] {
            let answer = try await send("/v1/pull", id: bad)
            let made = try #require(answer.headers["x-request-id"])
            #expect(made != bad)
            #expect(answer.error?.requestID == made)
            #expect(logged(made).count == 1)
            #expect(!lines.all.contains { $0.contains(bad) })
        }

        // None sent: one is made; success bodies stay as they are (a health
        // check is logged only when asked for).
        live.http.logsProbes = true
        let health = try await send("/v1/health", id: nil)
        let made = try #require(health.headers["x-request-id"])
        #expect(logged(made).count == 1)
        #expect(!health.text.contains("request_id"))
    }

    /// A long poll ended by a shutdown is a 503 whose log line says so,
    /// not "unknown" (an operator reading the log after a deploy).
    @Test func aShutdownsAnswerNamesItsCause() async throws {
        let lines = LogLines()
        let live = try LiveServer(.sqlite, log: lines.append)
        let token = try live.token("f-1")
        let waiting = Task { try await live.send("GET", "/v1/pull?collections=people&wait=30", token: token) }
        try await eventually("the long poll waits on the server") { live.server.liveConnections == 1 }
        live.server.closeLiveConnections()
        let answer = try await waiting.value
        #expect(answer.status == 503)
        let line = try #require(lines.all.first { $0.contains(#""status":503"#) })
        let cause = try JSONObject.parseObject(line)["cause"]?.stringValue
        #expect(cause?.contains("restarting") == true, "\(line)")
    }

    /// Behind a reverse proxy the log names the client the proxy forwards
    /// for, and only when the request comes from the proxy's address: anyone
    /// else can write `X-Forwarded-For` too.
    @Test func aTrustedProxyNamesTheClientInTheLogAndNoOneElseCan() async throws {
        let directory = try TemporaryDirectory()
        let server = try SyncServer(database: try SQLiteServerDatabase(path: directory.path("server.sqlite")), config: try ServerConfig())
        func clients(trusting proxy: String?, forwardedFor: String?) async throws -> [String?] {
            let lines = LogLines()
            let http = try HTTPServer(port: 0, log: lines.append, trustedProxy: proxy, server: server)
            http.logsProbes = true
            defer { http.stop() }
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(http.port)/v1/health")!)
            if let forwardedFor { request.setValue(forwardedFor, forHTTPHeaderField: "X-Forwarded-For") }
            _ = try await TestSession.shared.data(for: request)
            return try lines.all.map { try JSONObject.parseObject($0)["client"]?.stringValue }
        }
        #expect(try await clients(trusting: "127.0.0.1", forwardedFor: "203.0.113.7") == ["203.0.113.7"])
        // The proxy appends the address it saw; earlier entries are the client's own words.
        #expect(try await clients(trusting: "127.0.0.1", forwardedFor: "10.9.9.9, 203.0.113.7") == ["203.0.113.7"])
        #expect(try await clients(trusting: nil, forwardedFor: "203.0.113.7") == ["127.0.0.1"])
        #expect(try await clients(trusting: "192.0.2.1", forwardedFor: "203.0.113.7") == ["127.0.0.1"])
        #expect(try await clients(trusting: "127.0.0.1", forwardedFor: "<script>") == ["127.0.0.1"])

        // A proxy that appends a second header line after the client's own
        // (haproxy's `option forwardfor`): the last line is the proxy's.
        let lines = LogLines()
        let http = try HTTPServer(port: 0, log: lines.append, trustedProxy: "127.0.0.1", server: server)
        http.logsProbes = true
        defer { http.stop() }
        let request = "GET /v1/health HTTP/1.1\r\nHost: outpost\r\nX-Forwarded-For: 6.6.6.6\r\n"
            + "X-Forwarded-For: 203.0.113.7\r\nConnection: close\r\n\r\n"
        let reply = try await runBlocking { try HostileSocket.exchange(port: http.port, request: Array(request.utf8)) }
        #expect(reply.status == 200)
        #expect(try lines.all.map { try JSONObject.parseObject($0)["client"]?.stringValue } == ["203.0.113.7"])
    }
}
