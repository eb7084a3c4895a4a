import Foundation
import Outpost
import OutpostCore
import OutpostServer
import Testing

/// "Clocked in at 09:01 (phone time), received 09:40": every change carries
/// the device clock's time of the edit, the server keeps it beside its own
/// time of receipt, and another device reads both.
@Suite("Device time beside server time", .timeLimit(.minutes(2)))
struct DeviceTimeTests {
    @Test func theCapturingPhonesTimeReachesOtherDevicesBesideTheServersTime() async throws {
        let harness = try SyncHarness()
        // The phone's clock is an hour behind, and it stays offline a while.
        let phone = try harness.device("u-1", name: "phone", deviceClockOffset: -3_600)
        let capturedAt = phone.deviceClock.now()
        let uuid = try await phone.store.create(Person(name: "Ana"))
        #expect(try await phone.store.get(Person.self, uuid)?.deviceTime == capturedAt)
        harness.serverClock.advance(by: 39 * 60)
        phone.deviceClock.advance(by: 39 * 60)
        try await phone.engine.sync()

        let push = try #require(phone.network.delivered(to: "/v1/push").first?.body)
        let sent = try WireCoding.decode(PushRequest.self, from: push)
        #expect(sent.mutations.first?.deviceTime == ServerTimestamp(capturedAt))

        let office = try harness.device("u-1", name: "office", options: nil)
        try await office.engine.sync()
        let seen = try #require(try await office.store.get(Person.self, uuid))
        #expect(seen.deviceTime == capturedAt, "captured on the phone at")
        #expect(seen.serverUpdatedAt?.date == harness.serverClock.now(), "received by the server at")
        #expect(seen.serverUpdatedAt!.date!.timeIntervalSince(seen.deviceTime!) == 3_600 + 39 * 60)

        // An edit on the office device: its own time now.
        let editedAt = office.deviceClock.now()
        try await office.store.update(Person.self, uuid) { $0.phone = "555" }
        try await office.engine.sync()
        try await phone.engine.sync()
        #expect(try await phone.store.get(Person.self, uuid)?.deviceTime == editedAt)
    }

    @Test func theServerKeepsWhichAppVersionEachClientLastSent() async throws {
        let harness = try SyncHarness()
        var options = SyncOptions()
        options.periodicInterval = nil
        options.schemaVersion = 4
        options.clientName = "org.example.field/2.3.1"
        let phone = try harness.device("u-1", options: options)
        try await phone.store.create(Person(name: "Ana"))
        try await phone.engine.sync()
        let seen = try harness.server.database.read { sql in
            try sql.query("SELECT client_id, schema_version, app FROM client_versions", [])
        }.map { ($0.string(0), $0.optionalInt(1), $0.optionalString(2)) }
        #expect(seen.count == 1)
        #expect(seen.first?.0 == phone.store.clientID.wireText)
        #expect(seen.first?.1 == 4 && seen.first?.2 == "org.example.field/2.3.1")
    }
}
