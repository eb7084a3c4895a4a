import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// Tokens and row-level scope, once per backend.
@Suite("Access and scope", .timeLimit(.minutes(5)))
struct AccessTests {
    @Test(arguments: Backend.available)
    func tokensMissingUnknownExpiredRevoked(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        #expect(try await live.get("/v1/health", token: nil).status == 200, "health needs no token")
        #expect(try await live.get("/v1/scope", token: nil).error?.code == .unauthenticated)
        #expect(try await live.get("/v1/scope", token: "opt_nope").error?.code == .unauthenticated)
        let short = try live.token("u-1", ttl: 60)
        #expect(try await live.get("/v1/scope", token: short).status == 200)
        live.clock.advance(by: 61)
        let expired = try await live.get("/v1/scope", token: short)
        #expect(expired.status == 401)
        #expect(expired.error?.code == .tokenExpired)
        let revoked = try live.token("u-1")
        #expect(try live.server.tokens.revoke(revoked))
        let answer = try await live.get("/v1/scope", token: revoked)
        #expect(answer.status == 403)
        #expect(answer.error?.code == .tokenRevoked)
        // Only hashes are stored.
        let stored = try live.database.read { try $0.query("SELECT hash FROM tokens", []) }.map { $0.string(0) }
        #expect(!stored.contains(revoked) && !stored.contains(short))
    }

    @Test func aUserOverTheRateLimitGets429WithRetryAfterAndOthersGoOn() async throws {
        var config = try ServerConfig()
        config.rateLimit = try ServerConfig.RateLimit(perMinute: 60, burst: 3)
        let live = try LiveServer(.sqlite, config: config)
        let busy = try live.token("u-1")
        let calm = try live.token("u-2")
        for _ in 0..<3 { #expect(try await live.get("/v1/scope", token: busy).status == 200) }
        let refused = try await live.get("/v1/scope", token: busy)
        #expect(refused.status == 429)
        #expect(refused.error?.code == .rateLimited)
        #expect(refused.headers["retry-after"] == "1")
        #expect(try await live.get("/v1/scope", token: calm).status == 200, "the budget is per user")
        #expect(try await live.get("/v1/health", token: nil).status == 200, "health is never limited")
        // A second brings one request back, and no more.
        live.clock.advance(by: 1)
        #expect(try await live.get("/v1/scope", token: busy).status == 200)
        #expect(try await live.get("/v1/scope", token: busy).status == 429)
        // After a quiet minute the whole burst is back.
        live.clock.advance(by: 60)
        for _ in 0..<3 { #expect(try await live.get("/v1/scope", token: busy).status == 200) }
        #expect(throws: ConfigError.self) { _ = try ServerConfig.RateLimit(perMinute: 0, burst: 1) }
    }

    @Test(arguments: Backend.available)
    func everyRoleSeesExactlyItsScope(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let users: [(String, String)] = [("f-1", "t-1"), ("f-2", "t-1"), ("f-3", "t-2")]
        var owned: [String: UUID] = [:]
        for (user, team) in users {
            let token = try live.token(user, team: team)
            let device = TestDevice()
            let uuid = UUID()
            owned[user] = uuid
            _ = try await live.push(device.request(device.mutation(.create, uuid: uuid, data: ["name": .string("of \(user)")])), token: token)
        }
        let expectations: [(token: String, sees: Set<String>)] = [
            (try live.token("f-1", team: "t-1"), ["f-1"]),
            (try live.token("f-3", team: "t-2"), ["f-3"]),
            (try live.token("c-1", .coordinator, team: "t-1"), ["f-1", "f-2"]),
            (try live.token("c-2", .coordinator, team: "t-2"), ["f-3"]),
            (try live.token("a-1", .admin, team: "hq"), ["f-1", "f-2", "f-3"]),
        ]
        for (token, sees) in expectations {
            let visible = Set(sees.map { owned[$0]! })
            let pulled = try await live.pullAll(token: token, query: "&collections=people")
            #expect(Set(pulled.changes.map(\.uuid)) == visible)
            let search = try await live.get("/v1/search?collection=people&q=of", token: token).decode(SearchResponse.self)
            #expect(Set(search.records.map(\.uuid)) == visible)
            let scope = try await live.get("/v1/scope", token: token).decode(ScopeResponse.self)
            #expect(scope.collections["people"]?.count == Int64(visible.count))
            for (user, uuid) in owned {
                let get = try await live.get("/v1/records/people/\(uuid.wireText)", token: token)
                #expect(get.status == (sees.contains(user) ? 200 : 404))
                // Writing outside the scope is not found, never applied.
                let device = TestDevice()
                let write = try await live.push(device.request(device.mutation(.update, uuid: uuid, data: ["phone": "hacked"])), token: token)
                #expect(write.results[0].status == (sees.contains(user) ? .applied : .notFound))
            }
            // Nobody writes catalogs.
            let device = TestDevice()
            let catalogWrite = try await live.push(
                device.request(device.mutation(.create, "catalogs", data: ["catalog": "x", "code": "y", "name": "z"])), token: token)
            #expect(catalogWrite.results[0].status == .forbidden)
        }
    }

    @Test(arguments: Backend.available)
    func clientsCannotSetOwnerOrTeam(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("f-1", team: "t-1")
        let device = TestDevice()
        let answer = try await live.push(
            device.request(device.mutation(.create, data: ["name": "Ana", "owner": "f-2", "team": "t-2"])), token: token)
        #expect(answer.results[0].status == .rejected)
        #expect(answer.results[0].errors?["owner"] == "is not a field of people")
    }
}

/// Bad input gets a clear 4xx with the error body and changes nothing.
@Suite("Bad input", .timeLimit(.minutes(5)))
struct BadInputTests {
    @Test(arguments: Backend.available)
    func malformedRequestsAreRefusedAndChangeNothing(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("u-1")
        let client = UUID().wireText
        let valid = #"{"seq": 1, "id": "\#(UUID().wireText)", "op": "create", "collection": "people", "uuid": "\#(UUID().wireText)", "data": {"name": "Ana"}}"#
        let cases: [(body: Data, code: ErrorCode, status: Int)] = [
            (Data("{".utf8), .invalidJSON, 400),
            (Data("[]".utf8), .invalidRequest, 400),
            (Data(#"{"client_id": "nope", "mutations": []}"#.utf8), .invalidRequest, 400),
            (Data(#"{"client_id": "\#(client)", "mutations": "all"}"#.utf8), .invalidRequest, 400),
            (Data(#"{"client_id": "\#(client)", "mutations": [{"seq": 1}]}"#.utf8), .invalidRequest, 400),
            (Data(#"{"client_id": "\#(client)", "mutations": [\#(valid), {"seq": 2, "op": "explode"}]}"#.utf8), .invalidRequest, 400),
            (Data([0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x3A, 0x31, 0x7D]), .invalidJSON, 400),
            (Data((String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000)).utf8), .invalidRequest, 400),
            (Data(#"{"client_id": "\#(client)", "mutations": [\#(Array(repeating: valid, count: 501).joined(separator: ","))]}"#.utf8), .invalidRequest, 400),
        ]
        for (index, item) in cases.enumerated() {
            let response = try await live.send("POST", "/v1/push", token: token, body: item.body)
            #expect(response.status == item.status, "case \(index): \(response.text.prefix(200))")
            #expect(response.error?.code == item.code, "case \(index): \(response.text.prefix(200))")
            #expect(response.error?.message.isEmpty == false)
        }
        // 501 distinct, increasing seqs: too many for one push.
        var device = TestDevice()
        let many = (0..<501).map { _ in device.mutation(.create, data: ["name": "x"]) }
        let tooMany = try await live.send(
            "POST", "/v1/push", token: token, body: try WireCoding.encode(PushRequest(clientID: device.clientID, mutations: many)))
        #expect(tooMany.status == 413)
        #expect(tooMany.error?.code == .payloadTooLarge)
        // Over 4 MiB.
        device = TestDevice()
        let huge = try await live.send(
            "POST", "/v1/push", token: token, body: Data(repeating: UInt8(ascii: " "), count: 5 * 1024 * 1024))
        #expect(huge.status == 413)
        #expect(huge.error?.code == .payloadTooLarge)
        // Wrong content type, method, endpoint.
        #expect(try await live.send("POST", "/v1/push", token: token, body: Data("{}".utf8), contentType: "text/plain").status == 400)
        #expect(try await live.send("DELETE", "/v1/push", token: token).error?.code == .methodNotAllowed)
        #expect(try await live.get("/v1/nothing", token: token).error?.code == .notFound)
        #expect(try await live.get("/v2/pull", token: token).status == 404)
        #expect(try await live.get("/v1/records/people/not-a-uuid", token: token).status == 400)
        #expect(try await live.get("/v1/records/invoices/\(UUID().wireText)", token: token).status == 404)
        #expect(try await live.get("/v1/search?collection=people", token: token).status == 400)
        // Nothing was applied by any of it.
        #expect(try await live.pullAll(token: token, query: "&collections=people").changes.isEmpty)
    }
}
