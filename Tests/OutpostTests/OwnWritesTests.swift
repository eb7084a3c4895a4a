import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// After a push, the pull leaves on the server what the device wrote and
/// holds the answers of: a phone back from a day of 10,000 captures does
/// not download them again. Everything else still comes.
@Suite("A device does not download its own writes", .timeLimit(.minutes(3)))
struct OwnWritesTests {
    /// A device that has downloaded its scope (the catalogs) once.
    static func device(_ harness: SyncHarness, _ name: String) async throws -> SyncHarness.Device {
        let device = try harness.device("u-1", name: name)
        try await device.engine.sync()
        return device
    }

    @Test func whatADevicePushedIsNotDownloadedAgainAndOthersChangesAre() async throws {
        let harness = try SyncHarness()
        let phone = try await Self.device(harness, "phone")
        let tablet = try await Self.device(harness, "tablet")
        for index in 0..<30 { try await phone.store.create(Person(name: "phone \(index)")) }
        let first = try await phone.engine.sync()
        #expect(first.confirmed == 30)
        #expect(first.received == 0, "its own 30 stay on the server")
        let pull = phone.network.delivered(to: "/v1/pull").last?.target ?? ""
        #expect(pull.contains("client_id=\(phone.store.clientID.wireText)") && pull.contains("own_through=30"), "\(pull)")
        let held = try await phone.store.query(Person.self)
        #expect(held.count == 30 && held.allSatisfy { $0.syncState == .synced })

        // Another device of the same user downloads them; its own capture comes back to the phone.
        try await tablet.store.create(Person(name: "tablet"))
        let tablets = try await tablet.engine.sync()
        #expect(tablets.received == 30)
        let again = try await phone.engine.sync()
        #expect(again.received == 1)
        #expect(try await phone.store.query(Person.self).count == 31)
    }

    /// While a resync downloads everything again, rows missing from the
    /// download are deleted: the device must not leave its own out then.
    @Test func aResyncAsksForEverything() async throws {
        let harness = try SyncHarness()
        let phone = try await Self.device(harness, "phone")
        for index in 0..<5 { try await phone.store.create(Person(name: "phone \(index)")) }
        try await phone.engine.sync()
        try await phone.store.beginResync()
        let resync = try await phone.engine.sync()
        let pull = phone.network.delivered(to: "/v1/pull").last?.target ?? ""
        #expect(!pull.contains("own_through"), "\(pull)")
        #expect(try await phone.store.query(Person.self).count == 5, "nothing of its own deleted")
        #expect(resync.failure == nil)
    }

    /// A change refused whole and rejected here used a seq the server never
    /// applied: another copy of this database may have the server apply
    /// something else under it. From then on the device leaves nothing out.
    @Test func aChangeRejectedHereStopsLeavingOwnWritesOut() async throws {
        let harness = try SyncHarness()
        let phone = try await Self.device(harness, "phone")
        var deep = JSONValue.string("deep")
        for _ in 0..<31 { deep = .array([deep]) }
        let malformed = try await phone.store.create(in: "people", ["name": "Malformed", "notes": deep])
        let refused = try await phone.engine.sync()
        #expect(refused.rejected.map(\.record.uuid) == [malformed])
        try await phone.store.create(Person(name: "A"))
        let later = try await phone.engine.sync()
        #expect(later.confirmed == 1)
        let pull = phone.network.delivered(to: "/v1/pull").last?.target ?? ""
        #expect(!pull.contains("own_through"), "\(pull)")
        #expect(later.received == 1, "A comes back: the device no longer says it holds its own writes")
    }
}
