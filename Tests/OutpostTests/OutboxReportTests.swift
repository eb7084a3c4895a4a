import Foundation
import OutpostCore
@testable import Outpost
@testable import OutpostServer
import OutpostTesting
import Testing

/// Every request tells the server how the device's outbox stands, so an
/// operator learns of a device whose changes stopped leaving it.
@Suite("Outbox reports", .timeLimit(.minutes(2)))
struct OutboxReportTests {
    @Test func aDeviceWhosePushesFailIsSeenByTheServerUntilTheyGoThrough() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        let capturedAt = device.deviceClock.now()
        try await device.store.create(Person(name: "Ana"))
        device.deviceClock.advance(by: 30)
        try await device.store.create(Person(name: "Bea"))

        // Every push fails on the server, every pull goes through.
        struct Broken: Error {}
        harness.server.hooks.beforePushCommit = { _ in throw Broken() }
        _ = try? await device.engine.sync()
        #expect(await device.engine.currentStatus.oldestUnsentAt == capturedAt)
        #expect(await device.engine.currentStatus.unsent == 2)

        // Two hours on, still failing: the server counts the device as stuck.
        device.deviceClock.advance(by: 7200)
        harness.serverClock.advance(by: 7230)
        _ = try? await device.engine.sync()
        let stuck = harness.server.outboxes.summary(at: harness.serverClock.now())
        #expect(stuck.devices == 1 && stuck.largestUnsent == 2 && stuck.stuck == 1)
        #expect(stuck.oldestSeconds == 7230)

        // The server is fixed: the next sync's pull reports the outbox empty.
        harness.server.hooks.beforePushCommit = nil
        try await device.engine.sync()
        #expect(try harness.serverRecords().count == 2)
        #expect(await device.engine.currentStatus.oldestUnsentAt == nil)
        let drained = harness.server.outboxes.summary(at: harness.serverClock.now())
        #expect(drained == .init(devices: 1, largestUnsent: 0, oldestSeconds: 0, stuck: 0))
        await device.engine.stop()
    }

    @Test func anAppTooOldForTheServerIsStillSeenWithItsOutbox() async throws {
        let (harness, old) = try SyncHarness.serverAheadOfTheApp()
        let device = try harness.device("u-1", name: "phone", options: old)
        try await device.store.create(Person(name: "Ana"))
        device.deviceClock.advance(by: 4000)
        await #expect(throws: SyncFailure.updateRequired) { try await device.engine.sync() }
        let seen = harness.server.outboxes.summary(at: harness.serverClock.now())
        #expect(seen == .init(devices: 1, largestUnsent: 1, oldestSeconds: 4000, stuck: 1))
        try harness.server.sightings.write(to: harness.server.database)
        let apps = try harness.server.database.read { sql in
            try sql.query("SELECT app, schema_version FROM client_versions", []).map { "\($0.string(0)) \($0.int(1))" }
        }
        #expect(apps == ["org.example.field/1.0 1"], "the console shows the old app")

        // A request with a token the server does not know is not noted.
        let stranger = harness.server.handle(
            HTTPRequest(
                method: "GET", target: "/v1/pull?collections=people",
                headers: ["authorization": "Bearer not-a-token", "outpost-device": UUID().wireText, "outpost-outbox": "9; oldest=9999"],
                body: Data()))
        #expect(stranger.status == 426)
        #expect(harness.server.outboxes.summary(at: harness.serverClock.now()).devices == 1)
        await device.engine.stop()
    }
}
