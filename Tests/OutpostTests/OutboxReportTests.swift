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
}
