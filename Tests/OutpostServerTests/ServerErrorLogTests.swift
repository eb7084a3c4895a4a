import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

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
}
