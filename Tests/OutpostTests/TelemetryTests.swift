import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// Telemetry carries coarse network state, trigger and outcome —
/// never SSIDs, addresses or record contents.
@Suite("Sync telemetry", .timeLimit(.minutes(5)))
struct TelemetryTests {
    /// Every event the engine reports, gathered as they come.
    actor Collected {
        var events: [SyncTelemetryEvent] = []
        func append(_ event: SyncTelemetryEvent) { events.append(event) }
        func first(_ outcome: SyncTelemetryEvent.Outcome, _ trigger: SyncTrigger) -> SyncTelemetryEvent? {
            events.first { $0.outcome == outcome && $0.trigger == trigger }
        }
    }

    @Test func everyCycleReportsNetworkTriggerAndOutcomeAndNothingPersonal() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        let collected = Collected()
        let stream = await device.engine.telemetry()
        let collector = Task { for await event in stream { await collected.append(event) } }
        defer { collector.cancel() }

        // Offline on mobile data: the capture waits, the cycle says so.
        await device.engine.receive(PathHint(isConnected: false, isExpensive: true))
        device.network.isOffline = true
        let id = try await device.store.create(Person(name: "Lucía Secret-Name", phone: "555-0199"))
        await #expect(throws: SyncFailure.offline) { try await device.engine.sync() }
        try await eventually("the offline cycle is reported") { await collected.first(.offline, .manual) != nil }
        let offline = try #require(await collected.first(.offline, .manual))
        #expect(offline.networkAfter == .offline)
        #expect(offline.pathConnected == false)
        #expect(offline.pathExpensive == true)
        #expect(offline.confirmed == 0)

        // The path comes back: the reconnection's own cycle sends the capture.
        device.network.isOffline = false
        await device.engine.receive(PathHint(isConnected: true, isExpensive: true))
        try await eventually("the reconnection's cycle is reported") { await collected.first(.success, .connectivityRegained) != nil }
        let back = try #require(await collected.first(.success, .connectivityRegained))
        #expect(back.networkBefore != .online)
        #expect(back.networkAfter == .online)
        #expect(back.pathConnected == true)
        #expect(back.sent == 1)
        #expect(back.confirmed == 1)
        #expect(back.durationMilliseconds >= 0)

        // The server struggling: "not now", with its Retry-After and no code.
        try await device.engine.sync()
        device.network.inject(.status(503, retryAfter: 7)) { $0.target.hasPrefix("/v1/push") }
        try await device.store.update(Person.self, id) { $0.phone = "555-0100" }
        await #expect(throws: SyncFailure.serverBusy(retryAfter: 7)) { try await device.engine.sync() }
        try await eventually("the refused cycle is reported") { await collected.first(.serverBusy, .manual) != nil }
        let busy = try #require(await collected.first(.serverBusy, .manual))
        #expect(busy.retryAfterSeconds == 7)
        #expect(busy.errorCode == nil)
        #expect(busy.networkAfter == .degraded)

        // Nothing of the record, its id or the account is in what is exported.
        for event in await collected.events {
            let text = String(decoding: try WireCoding.encode(event), as: UTF8.self)
            for secret in ["Luc", "Secret", "555-01", id.wireText, id.uuidString, "u-1", "t-1", "http", "Injected"] {
                #expect(!text.contains(secret), "\(secret) in \(text)")
            }
            #expect(text.contains(#""network_after""#))
            #expect(text.contains(#""trigger""#))
        }
    }
}
