import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting
import Testing

/// The app's own sign-in gives the engine its tokens, and the server can ask
/// for a newer app: neither loses a capture.
@Suite("Credentials and app versions", .timeLimit(.minutes(2)))
struct CredentialsAndVersionTests {
    /// The app's sign-in: hands out the tokens it is given, in order, and
    /// remembers what it was asked.
    actor SignIn {
        var tokens: [String?]
        private(set) var requests: [CredentialsRequest] = []
        init(_ tokens: [String?]) { self.tokens = tokens }

        func token(for request: CredentialsRequest) -> String? {
            requests.append(request)
            return tokens.isEmpty ? nil : tokens.removeFirst()
        }

        nonisolated var provider: CredentialsProvider { { request in await self.token(for: request) } }
    }

    @Test func theProviderIsAskedAtStartAndAgainWhenTheServerRefusesItsToken() async throws {
        let harness = try SyncHarness()
        let short = try harness.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: 30)
        let fresh = try harness.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)
        let signIn = SignIn([short, fresh])
        let device = try harness.device("u-1", credentials: signIn.provider)
        try await device.store.create(Person(name: "Ana"))
        try await device.engine.sync()
        #expect(await signIn.requests == [.start])
        // The short token expires; the next sync is refused, asks, and goes on.
        harness.serverClock.advance(by: 60)
        try await device.store.create(Person(name: "Bea"))
        let report = try await device.engine.sync()
        #expect(report.failure == nil)
        #expect(await signIn.requests == [.start, .refused(short)])
        #expect(try harness.serverRecords().count == 2, "both captures arrived in the cycle that met the refusal")
        #expect(await device.engine.currentStatus.signInRequired == false)
    }

    @Test func theProviderIsNeverAskedOffline() async throws {
        let harness = try SyncHarness()
        let signIn = SignIn([try harness.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)])
        let device = try harness.device("u-1", credentials: signIn.provider)
        device.network.isOffline = true
        await device.engine.receive(PathHint(isConnected: false))
        await #expect(throws: SyncFailure.offline) { try await device.engine.sync() }
        #expect(await signIn.requests.isEmpty, "a refresh could not reach the sign-in service either")
        device.network.isOffline = false
        await device.engine.receive(PathHint(isConnected: true))
        try await device.engine.sync()
        #expect(await signIn.requests == [.start])
    }

    @Test func noTokenFromTheProviderMeansSignInAndCaptureGoesOn() async throws {
        let harness = try SyncHarness()
        let signIn = SignIn([nil])
        let device = try harness.device("u-1", credentials: signIn.provider)
        try await device.store.create(Person(name: "Ana"))
        await #expect(throws: SyncFailure.signInRequired) { try await device.engine.sync() }
        #expect(await device.engine.currentStatus.signInRequired)
        #expect(try await device.store.query(Person.self).count == 1)
        #expect(try harness.serverRecords().isEmpty)
    }

    @Test func anAppOlderThanTheServerAcceptsKeepsItsCapturesUntilItIsUpdated() async throws {
        let (harness, old) = try SyncHarness.serverAheadOfTheApp()
        let device = try harness.device("u-1", name: "phone", options: old)
        let ana = try await device.store.create(Person(name: "Ana"))
        await #expect(throws: SyncFailure.updateRequired) { try await device.engine.sync() }
        let status = await device.engine.currentStatus
        #expect(status.updateRequired)
        #expect(StatusMessage.text(for: status, locale: Locale(identifier: "en")).hasPrefix("Update the app to keep sending your changes."))
        #expect(try harness.serverRecords().isEmpty, "nothing applied")
        #expect(try await device.store.get(Person.self, ana)?.syncState == .pending, "the capture is kept")
        try await device.store.create(Person(name: "Bea"))

        // The app is updated: the same store, a newer schema, the same outbox.
        await device.engine.stop()
        var updated = old
        updated.schemaVersion = 2
        updated.clientName = "org.example.field/2.0"
        let token = try harness.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)
        let engine = SyncEngine(store: device.store, transport: device.network, token: token, options: updated, clock: harness.clock)
        try await engine.sync()
        #expect(try harness.serverRecords().count == 2)
        #expect(await engine.currentStatus.updateRequired == false)
        await engine.stop()
    }

    @Test func aRequestWithoutASchemaIsRefusedWhenTheServerNeedsOneButHealthAnswers() throws {
        var config = try ServerConfig()
        config.minSchema = 3
        let harness = try SyncHarness(config: config)
        let token = try harness.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)
        let pull = harness.server.handle(
            HTTPRequest(method: "GET", target: "/v1/pull?collections=people", headers: ["authorization": "Bearer \(token)"], body: Data()))
        #expect(pull.status == 426)
        let body = try WireCoding.decode(ErrorBody.self, from: Data(pull.body))
        #expect(body.code == .upgradeRequired && body.message.contains("schema 3"))
        let health = harness.server.handle(HTTPRequest(method: "GET", target: "/v1/health", headers: [:], body: Data()))
        #expect(health.status == 200)
    }
}
