import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// A clock-in must never say "registered" before the server did: an action
/// that needs the server's confirmation goes at once, fails fast and plainly
/// offline, and is done only on the server's result.
@Suite("Actions that need the server's confirmation", .timeLimit(.minutes(2)))
struct ConfirmedActionTests {
    /// A record the server refuses: people need a name.
    struct Nameless: SyncRecord {
        static let collection = "people"
        var phone: String
    }

    @Test func anOnlineActionReturnsOnlyWithTheServersResult() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        let record = try await device.engine.submit(Person(name: "clock-in"))
        #expect(record.syncState == .synced)
        #expect(record.serverUpdatedAt != nil && record.deviceTime != nil, "received at, captured at")
        #expect(try harness.serverRecords().count == 1)
    }

    @Test func offlineItFailsAtOnceAndKeepsNothing() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        device.network.isOffline = true
        await device.engine.receive(PathHint(isConnected: false))
        await #expect(throws: ConfirmationError.notSent(.offline)) { try await device.engine.submit(Person(name: "clock-in")) }
        #expect(try await device.store.query(Person.self).isEmpty, "not kept as if it had happened")
        #expect(try await device.store.outboxEntries().isEmpty, "never queued")
        #expect(device.network.delivered(to: "/v1/push").isEmpty)
    }

    @Test func aLostAnswerIsCheckingResultAndTheResendResolvesItOnce() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        device.network.inject(.dropResponse) { $0.target.hasPrefix("/v1/push") }
        var pending: UUID?
        do {
            try await device.engine.submit(Person(name: "clock-in"))
            Issue.record("a lost answer must not read as done")
        } catch let ConfirmationError.checkingResult(uuid) {
            pending = uuid
        }
        let uuid = try #require(pending)
        #expect(await device.engine.currentStatus.awaitingConfirmation == 1, "shown as checking the result")
        #expect(try await device.store.get(Person.self, uuid)?.syncState == .pending)
        try await device.engine.sync()
        #expect(try await device.store.get(Person.self, uuid)?.syncState == .synced)
        #expect(try harness.serverRecords().count == 1, "applied once")
    }

    @Test func aRefusalSaysWhyAndKeepsNothing() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        do {
            try await device.engine.submit(Nameless(phone: "555"))
            Issue.record("the server refuses a person without a name")
        } catch let ConfirmationError.refused(rejection) {
            #expect(rejection.errors["name"] != nil, "\(rejection)")
        }
        #expect(try await device.store.query(RecordQuery("people")).isEmpty)
        #expect(try await device.store.rejectedRecords().isEmpty)
    }
}
