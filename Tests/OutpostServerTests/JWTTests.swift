import Foundation
import Outpost
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// JWTs from the app's own identity provider, beside opaque tokens: RS256
/// and ES256 accepted with their claims; every way a token can be wrong
/// refused with 401; keys rotated by the provider picked up; a JWKS that
/// cannot be reached leaves known keys working.
@Suite("JWT identity", .timeLimit(.minutes(3)))
struct JWTTests {
    struct Setup: Sendable {
        let provider: TestIdentityProvider
        let rsa: TestIdentityProvider.Key
        let ec: TestIdentityProvider.Key
        let live: LiveServer
        let log: LogLines
    }

    static func setUp(_ backend: Backend = .sqlite, jwks: String? = nil) async throws -> Setup {
        let provider = try TestIdentityProvider()
        let rsa = try await provider.makeKey("rsa-1", "RS256")
        let ec = try await provider.makeKey("ec-1", "ES256")
        provider.publish([rsa, ec])
        var config = try ServerConfig()
        config.jwt = provider.settings(jwks: jwks)
        let log = LogLines()
        let live = try LiveServer(backend, config: config, log: log.append)
        return Setup(provider: provider, rsa: rsa, ec: ec, live: live, log: log)
    }

    func pull(_ live: LiveServer, _ token: String) async throws -> LiveServer.Response {
        try await live.get("/v1/pull?collections=people", token: token)
    }

    @Test(arguments: Backend.available)
    func rs256AndES256TokensActAsTheirSubjectBesideOpaqueTokens(_ backend: Backend) async throws {
        let setup = try await Self.setUp(backend)
        let now = setup.live.clock.now()
        let ana = try await setup.provider.token(setup.provider.claims("ana@example.test", now: now), key: setup.rsa)
        let coordinator = try await setup.provider.token(
            setup.provider.claims("coord@example.test", role: "coordinator", now: now), key: setup.ec)
        let device = TestDevice()
        let pushed = try await setup.live.push(device.request(device.mutation(.create, data: ["name": "Ana"])), token: ana)
        #expect(pushed.results.map(\.status) == [.applied])
        #expect(pushed.results.first?.record?.owner == "ana@example.test")
        // The coordinator of the same team sees it; an opaque token still works.
        let seen = try await setup.live.pullAll(token: coordinator, query: "&collections=people")
        #expect(seen.changes.count == 1)
        let opaque = try setup.live.token("bea")
        #expect(try await pull(setup.live, opaque).status == 200)
        // An audience among several is enough.
        var claims = setup.provider.claims("ana@example.test", now: now)
        claims["aud"] = .array(["another-app", .string(setup.provider.audience)])
        #expect(try await pull(setup.live, try await setup.provider.token(claims, key: setup.rsa)).status == 200)
    }

    /// A JWKS that cannot be read (a path typo, the provider down at start)
    /// leaves every JWT refused: the server says it is not ready, with why,
    /// until a key arrives.
    @Test func aServerWhoseJWKSGaveNoKeyIsNotReadyUntilOneArrives() async throws {
        let provider = try TestIdentityProvider()
        let rsa = try await provider.makeKey("rsa-1", "RS256")
        provider.publish([rsa])
        provider.setReachable(false)
        var config = try ServerConfig()
        var settings = provider.settings()
        settings.refetchInterval = 0
        config.jwt = settings
        let live = try LiveServer(.sqlite, config: config, log: LogLines().append)
        let down = try await live.get("/v1/ready", token: nil)
        #expect(down.status == 503)
        #expect(down.text.contains("gave no usable key"), "\(down.text)")
        #expect(down.headers["retry-after"] != nil)
        provider.setReachable(true)
        try await eventually("ready once the provider answers") { try await live.get("/v1/ready", token: nil).status == 200 }
    }

    @Test func everyWrongTokenIsRefusedWith401() async throws {
        let setup = try await Self.setUp()
        let provider = setup.provider
        let now = setup.live.clock.now()
        let good = provider.claims("ana", now: now)
        func with(_ change: (inout JSONObject) -> Void) -> JSONObject {
            var claims = good
            change(&claims)
            return claims
        }
        let stranger = try await provider.makeKey("stranger", "RS256")  // never published
        let header = Base64URL.encode(Array(#"{"alg":"none","typ":"JWT"}"#.utf8))
        let payload = Base64URL.encode(Array(try good.jsonText().utf8))
        // HS256 signed with the RSA key's public JWK text as the secret: a
        // verifier that let the token pick HMAC would accept it.
        let hsInput = Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT","kid":"rsa-1"}"#.utf8)) + "." + payload
        let confused = hsInput + "." + Base64URL.encode(try await provider.hmac(hsInput, secret: Array(try setup.rsa.jwk.jsonText().utf8)))
        let signed = try await provider.token(good, key: setup.rsa)
        let parts = signed.split(separator: ".").map(String.init)
        let admin = Base64URL.encode(Array(try with { $0["role"] = "admin" }.jsonText().utf8))

        let cases: [(String, String, ErrorCode)] = [
            ("alg none", header + "." + payload + ".", .unauthenticated),
            ("HS256 with the public key as secret", confused, .unauthenticated),
            ("wrong audience", try await provider.token(with { $0["aud"] = "another-app" }, key: setup.rsa), .unauthenticated),
            ("wrong issuer", try await provider.token(with { $0["iss"] = "https://evil.example/" }, key: setup.rsa), .unauthenticated),
            ("expired", try await provider.token(with { $0["exp"] = .int(Int64(now.timeIntervalSince1970) - 120) }, key: setup.rsa), .tokenExpired),
            ("no exp", try await provider.token(with { $0["exp"] = nil }, key: setup.rsa), .unauthenticated),
            ("not yet valid", try await provider.token(with { $0["nbf"] = .int(Int64(now.timeIntervalSince1970) + 600) }, key: setup.ec), .unauthenticated),
            ("issued in the future", try await provider.token(with { $0["iat"] = .int(Int64(now.timeIntervalSince1970) + 600) }, key: setup.ec), .unauthenticated),
            ("unknown kid", try await provider.token(good, key: stranger), .unauthenticated),
            ("a role that is not a role", try await provider.token(with { $0["role"] = "superuser" }, key: setup.rsa), .unauthenticated),
            ("no sub", try await provider.token(with { $0["sub"] = nil }, key: setup.rsa), .unauthenticated),
            ("modified payload", parts[0] + "." + admin + "." + parts[2], .unauthenticated),
            ("ES256 header over an RSA key's kid", try await provider.token(
                good, key: setup.rsa, header: ["alg": "ES256", "kid": "rsa-1"]), .unauthenticated),
            ("not base64", "eyJ.!!!.abc", .unauthenticated),
        ]
        for (name, token, code) in cases {
            let answer = try await pull(setup.live, token)
            #expect(answer.status == 401, "\(name): \(answer.status) \(answer.text)")
            #expect(answer.error?.code == code, "\(name): \(answer.text)")
        }
        // The good one passes, so each refusal above is about its own fault.
        #expect(try await pull(setup.live, signed).status == 200)
        // Within the leeway (60 s), an expired clock difference is tolerated.
        let slightly = try await provider.token(with { $0["exp"] = .int(Int64(now.timeIntervalSince1970) - 30) }, key: setup.rsa)
        #expect(try await pull(setup.live, slightly).status == 200)
    }

    @Test func aRotatedKeyIsFetchedOnceAndAnUnreachableJWKSLeavesKnownKeysWorking() async throws {
        let setup = try await Self.setUp()
        let provider = setup.provider
        let now = setup.live.clock.now()
        let fetchesAtStart = provider.fetches
        #expect(fetchesAtStart == 1, "keys are loaded when the server starts")
        // The provider rotates: a new key is published, tokens signed by it arrive.
        let rotated = try await provider.makeKey("rsa-2", "RS256")
        provider.publish([setup.rsa, setup.ec, rotated])
        let fresh = try await provider.token(provider.claims("ana", now: now), key: rotated)
        #expect(try await pull(setup.live, fresh).status == 200)
        #expect(provider.fetches == fetchesAtStart + 1)
        // Another unknown kid within the minute: refused without fetching again.
        let unknown = try await provider.token(provider.claims("ana", now: now), key: try await provider.makeKey("rsa-3", "RS256"))
        #expect(try await pull(setup.live, unknown).status == 401)
        #expect(provider.fetches == fetchesAtStart + 1, "at most one fetch a minute")

        // The provider goes down: known keys keep working, and the log says why unknown ones fail.
        provider.setReachable(false)
        // The live verifier fetched within the minute and will not try again
        // yet; a verifier starting now meets the outage and logs it.
        let downVerifier = JWTVerifier(provider.settings(), clock: setup.live.clock, log: setup.log.append)
        downVerifier.start()
        #expect(setup.log.all.contains { $0.contains("could not be read") && $0.contains("keep working") })
        #expect(try await pull(setup.live, try await provider.token(provider.claims("ana", now: now), key: setup.ec)).status == 200)
    }

    @Test func aJWKSFileWorksAndAMissingOneStillStartsTheServer() async throws {
        let provider = try TestIdentityProvider()
        let key = try await provider.makeKey("file-1", "ES256")
        let file = provider.directory.path("jwks.json")
        let document: JSONObject = ["keys": .array([.object(key.jwk)])]
        try Data(try document.jsonText().utf8).write(to: URL(fileURLWithPath: file))
        var config = try ServerConfig()
        config.jwt = provider.settings(jwks: file)
        let live = try LiveServer(.sqlite, config: config)
        let token = try await provider.token(provider.claims("ana", now: live.clock.now()), key: key)
        #expect(try await pull(live, token).status == 200)

        config.jwt = provider.settings(jwks: provider.directory.path("missing.json"))
        let lines = LogLines()
        let degraded = try LiveServer(.sqlite, config: config, log: lines.append)
        #expect(try await pull(degraded, token).status == 401)
        #expect(try await pull(degraded, try degraded.token("bea")).status == 200, "opaque tokens work without the JWKS")
    }

    /// The library's credentials provider gives a fresh JWT when the server
    /// refuses an expired one; the capture goes through in that cycle.
    @Test func theLibraryRefreshesAnExpiredJWTThroughItsCredentialsProvider() async throws {
        let setup = try await Self.setUp()
        let provider = setup.provider
        let now = setup.live.clock.now()
        var old = provider.claims("ana", now: now)
        old["exp"] = .int(Int64(now.timeIntervalSince1970) - 3600)
        let expired = try await provider.token(old, key: setup.rsa)
        let fresh = try await provider.token(provider.claims("ana", now: now), key: setup.ec)
        let asked = Locked<[CredentialsRequest]>([])
        let directory = try TemporaryDirectory()
        let store = try LocalStore(path: directory.path("device.sqlite"), collections: [CollectionDescriptor(name: "people")])
        var options = SyncOptions()
        options.liveUpdates = false
        options.periodicInterval = nil
        let engine = SyncEngine(
            store: store, transport: URLSessionTransport(baseURL: setup.live.base), options: options,
            credentials: { request in
                asked.withLock { $0.append(request) }
                return asked.current.count == 1 ? expired : fresh
            })
        _ = try await store.write { try $0.create(in: "people", ["name": "Ana"]) }
        let report = try await engine.sync()
        #expect(report.failure == nil)
        #expect(asked.current == [.start, .refused(expired)])
        let stored = try setup.live.database.read { try $0.query("SELECT owner FROM records WHERE collection = 'people'", []) }
        #expect(stored.map { $0.string(0) } == ["ana"])
        await store.close()
    }

    @Test(arguments: Backend.available)
    func anAdministratorsJWTSignsInToTheConsoleUntilItExpires(_ backend: Backend) async throws {
        let setup = try await Self.setUp(backend)
        let live = setup.live
        let now = live.clock.now()
        var claims = setup.provider.claims("boss@example.test", role: "admin", team: "hq", now: now)
        claims["exp"] = .int(Int64(now.timeIntervalSince1970) + 1_200)
        let admin = try await setup.provider.token(claims, key: setup.rsa)
        var console = ConsoleClient(live)
        #expect(try await console.signIn(admin).status == 200)
        #expect(try await console.get("/admin/api/session")["user"] == "boss@example.test")
        // A field worker's JWT is refused with the same sentence as an opaque one.
        var field = ConsoleClient(live)
        let ana = try await setup.provider.token(setup.provider.claims("ana@example.test", now: now), key: setup.ec)
        let refused = try await field.signIn(ana)
        #expect(refused.status == 403 && refused.error?.message.contains("The console is for administrators") == true)
        // The session ends with the token it came from (20 minutes), before its own 8 hours or its idle limit.
        live.clock.advance(by: 15 * 60)
        #expect(try await console.send("GET", "/admin/api/devices").status == 200)
        live.clock.advance(by: 6 * 60)
        #expect(try await console.send("GET", "/admin/api/devices").status == 401)
    }
}

