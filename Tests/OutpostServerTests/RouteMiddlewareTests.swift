import Foundation
import Outpost
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The middleware the route table puts in front of handlers, each alone,
/// and the router's refusals as the server answers them.
@Suite("Route middleware", .timeLimit(.minutes(3)))
struct RouteMiddlewareTests {
    static func request(_ method: String = "GET", _ path: String = "/v1/pull", headers: [String: String] = [:]) -> HTTPRequest {
        HTTPRequest(method: method, path: path, headers: headers)
    }

    @Test func theSchemaCheckRefusesAnOldAppWith426() throws {
        #expect(throws: Never.self) { try SchemaCheck.check(Self.request(), minimum: nil) }
        #expect(throws: Never.self) { try SchemaCheck.check(Self.request(headers: ["Outpost-Schema": " 4 "]), minimum: 4) }
        for headers in [[:], ["Outpost-Schema": "3"], ["Outpost-Schema": "x"]] {
            do {
                try SchemaCheck.check(Self.request(headers: headers), minimum: 4)
                Issue.record("\(headers) passed")
            } catch let error as APIError {
                #expect(error.status == 426 && error.body.code == .upgradeRequired)
            }
        }
    }

    @Test func authenticationNamesTheCallerOrRefuses() throws {
        let live = try LiveServer(.sqlite)
        let token = try live.token("ana")
        var request = RouteRequest(Self.request(headers: ["Authorization": "Bearer \(token)"]), canWait: false)
        try Authentication().prepare(&request, server: live.server)
        #expect(request.principal?.user == "ana" && request.user == "ana")

        for (header, code) in [("Basic abc", ErrorCode.unauthenticated), ("Bearer nope", .unauthenticated)] {
            var refused = RouteRequest(Self.request(headers: ["Authorization": header]), canWait: false)
            let answer = SyncServer.errorAnswer(
                try #require(throws: (any Error).self) { try Authentication().prepare(&refused, server: live.server) }, user: nil)
            #expect(answer.status == 401 && String(decoding: answer.body, as: UTF8.self).contains(code.rawValue), "\(header)")
            #expect(refused.principal == nil)
        }
        var missing = RouteRequest(Self.request(), canWait: false)
        #expect(throws: TokenStore.Failure.missing) { try Authentication().prepare(&missing, server: live.server) }
    }

    @Test func aSightingIsNotedOnlyForAnAuthenticatedDevice() throws {
        let live = try LiveServer(.sqlite)
        let device = UUID()
        var anonymous = RouteRequest(Self.request(headers: ["Outpost-Device": device.wireText]), canWait: false)
        try DeviceSightingNote().prepare(&anonymous, server: live.server)
        try live.server.sightings.write(to: live.database)
        #expect(try Self.seenDevices(live) == [])

        var signed = anonymous
        signed.principal = Principal(user: "ana", role: .field, team: "t-1")
        try DeviceSightingNote().prepare(&signed, server: live.server)
        try live.server.sightings.write(to: live.database)
        #expect(try Self.seenDevices(live) == ["ana " + device.wireText])
    }

    static func seenDevices(_ live: LiveServer) throws -> [String] {
        try live.database.read { sql in
            try sql.query("SELECT user_id, client_id FROM client_versions ORDER BY client_id", []).map {
                $0.string(0) + " " + $0.string(1)
            }
        }
    }

    @Test func theRateLimitCountsEachAuthenticatedRequest() throws {
        var config = try ServerConfig()
        config.rateLimit = try ServerConfig.RateLimit(perMinute: 60, burst: 2)
        let live = try LiveServer(.sqlite, config: config)
        var request = RouteRequest(Self.request(), canWait: false)
        request.principal = Principal(user: "ana", role: .field, team: "t-1")
        try RateLimitCheck().prepare(&request, server: live.server)
        try RateLimitCheck().prepare(&request, server: live.server)
        #expect(throws: APIError.self) { try RateLimitCheck().prepare(&request, server: live.server) }
        var anonymous = RouteRequest(Self.request(), canWait: false)
        try RateLimitCheck().prepare(&anonymous, server: live.server)
    }

    @Test func theConsoleHeadersGoOnEveryConsoleAnswer() {
        var response = HTTPResponse(status: 404)
        ConsoleHeaders().finish(&response, request: RouteRequest(Self.request(), canWait: false))
        #expect(response.headers["Content-Security-Policy"]?.hasPrefix("default-src 'none'") == true)
        #expect(response.headers["Cache-Control"] == "no-store")
        var cached = HTTPResponse(status: 200, headers: ["Cache-Control": "no-cache"])
        ConsoleHeaders().finish(&cached, request: RouteRequest(Self.request(), canWait: false))
        #expect(cached.headers["Cache-Control"] == "no-cache")
    }

    // MARK: The router's refusals, answered

    @Test func anUnknownPathIs404AndAWrongMethod405WithAllow() throws {
        let live = try LiveServer(.sqlite)
        let unknown = live.server.handle(Self.request("GET", "/v2/pull"))
        #expect(unknown.status == 404)
        #expect(String(decoding: unknown.body, as: UTF8.self).contains("There is no such endpoint."))

        let wrong = live.server.handle(Self.request("DELETE", "/v1/push"))
        #expect(wrong.status == 405 && wrong.headers["Allow"] == "POST")
        #expect(String(decoding: wrong.body, as: UTF8.self).contains(#""code":"method_not_allowed""#))
        let blob = live.server.handle(Self.request("POST", "/v1/blobs/" + String(repeating: "0", count: 64)))
        #expect(blob.headers["Allow"] == "PUT, HEAD, GET")
        #expect(String(decoding: blob.body, as: UTF8.self).contains("This endpoint answers PUT, HEAD and GET."))
    }

    @Test func anOldAppLearnsToUpdateBeforeAWrongMethodOrPath() throws {
        var config = try ServerConfig()
        config.minSchema = 3
        let live = try LiveServer(.sqlite, config: config)
        #expect(live.server.handle(Self.request("DELETE", "/v1/push")).status == 426)
        #expect(live.server.handle(Self.request("GET", "/v1/nothing")).status == 426)
        #expect(live.server.handle(Self.request("GET", "/v1/nothing", headers: ["Outpost-Schema": "3"])).status == 404)
        // Probes are not apps.
        #expect(live.server.handle(Self.request("POST", "/v1/health")).status == 405)
    }

    @Test func aPercentEncodedPathParameterReachesItsHandlerDecodedOnce() async throws {
        let live = try LiveServer(.sqlite)
        let token = try live.token("ana")
        let device = TestDevice()
        let person = UUID()
        _ = try await live.push(device.request(device.mutation(.create, uuid: person, data: ["name": "Ana Lima"])), token: token)
        // The socket layer decodes the path before the router sees it.
        let encoded = person.wireText.replacingOccurrences(of: "-", with: "%2D")
        let overSocket = try await live.get("/v1/records/peop%6Ce/\(encoded)", token: token)
        #expect(overSocket.status == 200, "\(overSocket.text)")
        #expect(overSocket.text.contains(person.wireText))
        let inProcess = live.server.handle(
            HTTPRequest(method: "GET", path: "/v1/records/people/\(person.wireText)", headers: ["Authorization": "Bearer \(token)"]))
        #expect(inProcess.status == 200)
    }

    // MARK: Sightings over a real socket

    @Test(arguments: Backend.available)
    func aDeviceSeenOnlyThroughItsStreamOrBlobUploadsIsListed(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let streamer = UUID()
        let uploader = UUID()
        var admin = ConsoleClient(live)
        try await admin.signIn(try live.token("boss", .admin))

        let transport = URLSessionTransport(baseURL: live.base)
        let stream = try await transport.openStream(
            TransportRequest(
                method: "GET", target: "/v1/stream",
                headers: ["Authorization": "Bearer \(try live.token("ana"))", "Outpost-Device": streamer.wireText], timeout: 10))
        #expect(stream.status == 200)

        let (bytes, sha) = BlobTests.blob(1000)
        let uploaded = try await live.send(
            "PUT", "/v1/blobs/\(sha)", token: try live.token("bea"), body: Data(bytes), contentType: "image/jpeg",
            headers: ["Outpost-Device": uploader.wireText])
        #expect(uploaded.status == 200, "\(uploaded.text)")

        let devices = try await admin.get("/admin/api/devices?sort=recent")["devices"]?.arrayValue ?? []
        let users = Dictionary(
            uniqueKeysWithValues: devices.compactMap { device in
                device["client"]?.stringValue.map { ($0, device["user"]?.stringValue ?? "") }
            })
        #expect(users[streamer.wireText] == "ana", "a device that only streams is seen")
        #expect(users[uploader.wireText] == "bea", "a device that only uploads is seen")
        _ = stream
    }
}
