import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// `GET /v1/health` reports the push limits, and they are the ones the
/// server enforces: a push at each limit passes, one past it is refused.
@Suite("Health limits", .timeLimit(.minutes(3)))
struct HealthLimitsTests {
    @Test func theReportedLimitsAreTheEnforcedOnes() async throws {
        var config = try ServerConfig()
        config.maxBodyBytes = 256 * 1024
        let live = try LiveServer(.sqlite, config: config)
        let token = try live.token("f-1")
        let limits = try #require(try await live.get("/v1/health", token: nil).decode(HealthResponse.self).limits)
        #expect(limits == HealthResponse.Limits(maxBodyBytes: 256 * 1024, maxMutations: 500, maxFieldBytes: 65_536, maxDepth: 32))

        func push(_ mutations: [Mutation]) async throws -> LiveServer.Response {
            try await live.send(
                "POST", "/v1/push", token: token, body: try WireCoding.encode(PushRequest(clientID: UUID(), mutations: mutations)))
        }
        func creates(_ count: Int, notes: String? = nil) -> [Mutation] {
            (1...count).map { seq in
                var data: JSONObject = ["name": "n"]
                if let notes { data["notes"] = .string(notes) }
                return Mutation(seq: Int64(seq), id: UUID(), op: .create, collection: "people", uuid: UUID(), data: data)
            }
        }

        #expect(try await push(creates(limits.maxMutations)).status == 200)
        #expect(try await push(creates(limits.maxMutations + 1)).status == 413)

        let atLimit = try await push(creates(1, notes: String(repeating: "é", count: limits.maxFieldBytes / 2)))
        #expect(try atLimit.decode(PushResponse.self).results.first?.status == .applied)
        let pastLimit = try await push(creates(1, notes: String(repeating: "é", count: limits.maxFieldBytes / 2) + "x"))
        #expect(try pastLimit.decode(PushResponse.self).results.first?.status == .rejected)

        let big = String(repeating: "x", count: 60_000)
        let overBody = try await push(creates(5, notes: big))
        #expect(overBody.status == 413, "\(overBody.status)")
        #expect(try await push(creates(4, notes: big)).status == 200)

        func nested(_ depth: Int) -> Data {
            // The body object is level 1; each further level is one array.
            Data((#"{"x": "# + String(repeating: "[", count: depth - 1) + String(repeating: "]", count: depth - 1) + "}").utf8)
        }
        let deepest = try await live.send("POST", "/v1/push", token: token, body: nested(limits.maxDepth))
        #expect(deepest.error?.message.contains("nested") == false, "\(deepest.text)")
        let tooDeep = try await live.send("POST", "/v1/push", token: token, body: nested(limits.maxDepth + 1))
        #expect(tooDeep.status == 400)
        #expect(tooDeep.error?.message.contains("nested more than \(limits.maxDepth)") == true, "\(tooDeep.text)")
    }
}
