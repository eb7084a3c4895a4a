import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting
import Testing

/// Nothing stops the queue: a batch too big, a value the server refuses
/// whole, a spent retry budget. Each stops at most its own change, visibly,
/// and the pull runs whatever the push did.
@Suite("Poison batches", .timeLimit(.minutes(5)))
struct PoisonQueueTests {
    static let notes45KB = String(repeating: "field notes ", count: 3_840)

    /// A value nested deeper than the server reads (32 levels, the envelope included).
    static var thirtyDeep: JSONValue {
        var value = JSONValue.string("bottom")
        for _ in 0..<30 { value = .array([value]) }
        return value
    }

    @Test func aHundredLargeRecordsTravelInBatchesTheServerAccepts() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        for index in 0..<100 {
            try await device.store.create(in: "people", ["name": .string("p\(index)"), "notes": .string(Self.notes45KB)])
        }
        let report = try await device.engine.sync()
        #expect(report.confirmed == 100)
        #expect(try harness.serverRecords().count == 100)
        let pushes = device.network.delivered(to: "/v1/push")
        #expect(pushes.allSatisfy { ($0.body?.count ?? 0) <= 4 * 1024 * 1024 }, "every request under the server's body limit")
    }

    @Test func aBatchRefusedAsTooLargeIsSplitNotRetriedForEver() async throws {
        let harness = try SyncHarness()
        var options = SyncOptions()
        options.periodicInterval = nil
        options.reconnectJitter = .zero
        options.pushBatchBytes = .max  // as before batches were sized by bytes
        let device = try harness.device("u-1", options: options)
        for index in 0..<100 {
            try await device.store.create(in: "people", ["name": .string("p\(index)"), "notes": .string(Self.notes45KB)])
        }
        let report = try await device.engine.sync()
        #expect(report.confirmed == 100, "narrowed until each request fits")
        #expect(report.rejected.isEmpty, "no record is at fault")
        #expect(try harness.serverRecords().count == 100)
        #expect(try await device.store.outboxEntries().isEmpty)
    }

    @Test func aMalformedValueIsRejectedAloneAndTheQueueAndThePullGoOn() async throws {
        let harness = try SyncHarness()
        let colleague = try harness.device("u-1", name: "colleague")
        try await colleague.store.create(Person(name: "From a colleague"))
        try await colleague.engine.sync()

        let device = try harness.device("u-1")
        try await device.store.create(Person(name: "good 1"))
        let bad = try await device.store.create(in: "people", ["name": .string("bad"), "notes": Self.thirtyDeep])
        try await device.store.create(Person(name: "good 2"))
        let report = try await device.engine.sync()
        #expect(report.confirmed == 2)
        #expect(report.rejected.map(\.record.uuid) == [bad])
        let names = Set(try harness.serverRecords().compactMap(\.data))
        #expect(names.count == 3 && !names.contains { $0.contains("bad") }, "the good ones and the colleague's")
        #expect(try await device.store.query(Person.self).contains { $0.value.name == "From a colleague" }, "the pull ran")

        let record = try #require(try await device.store.get(Person.self, bad))
        #expect(record.syncState == .rejected)
        #expect(record.rejection?.code == "invalid_request")
        #expect(record.rejection?.message?.contains("nested") == true, "the server's own words: \(String(describing: record.rejection))")

        // The person fixes the record: it is sent again, whole, and accepted.
        try await device.store.update(in: "people", bad, patch: ["notes": .string("fixed")])
        try await device.engine.sync()
        #expect(try harness.serverRecords().contains { $0.uuid == bad.wireText })
        #expect(try await device.store.get(Person.self, bad)?.syncState == .synced)
    }

    @Test func onceTheServersLimitsAreKnownAValueTheyRefuseIsRefusedAtCapture() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        // Unknown limits: the server decides (and the queue copes, above).
        let early = try await device.store.create(in: "people", ["name": .string("deep"), "notes": Self.thirtyDeep])
        try await device.engine.sync()
        #expect(try await device.store.get(Person.self, early)?.syncState == .rejected)
        // The refusal made the device read the published limits.
        #expect(await device.store.serverLimits?.maxDepth == 32)
        do {
            try await device.store.create(in: "people", ["name": .string("deep"), "notes": Self.thirtyDeep])
            Issue.record("a value nested past the limit is refused at capture")
        } catch StoreError.invalidRecord(let reason) {
            #expect(reason.contains("nested"), "\(reason)")
        }
        do {
            try await device.store.create(in: "people", ["name": .string(String(repeating: "x", count: 70_000))])
            Issue.record("a field over the limit is refused at capture")
        } catch StoreError.invalidRecord(let reason) {
            #expect(reason.contains("'name'") && reason.contains("65536"), "\(reason)")
        }
        let fine = try await device.store.create(in: "people", ["name": .string("fine"), "notes": .string(Self.notes45KB)])
        try await device.engine.sync()
        #expect(try await device.store.get(Person.self, fine)?.syncState == .synced)
        // Kept across launches.
        await device.store.close()
        let reopened = try LocalStore(path: device.store.path, collections: [Person.descriptor, Visit.descriptor])
        #expect(await reopened.serverLimits?.maxBodyBytes == 4 * 1024 * 1024)
    }

    @Test func deletingANeverAppliedRejectedCreateSendsNothing() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        let bad = try await device.store.create(in: "people", ["name": .string("bad"), "notes": Self.thirtyDeep])
        try await device.engine.sync()
        #expect(try await device.store.get(Person.self, bad)?.syncState == .rejected)
        let pushesBefore = device.network.delivered(to: "/v1/push").count
        try await device.store.delete(in: "people", bad)
        try await device.engine.sync()
        #expect(device.network.delivered(to: "/v1/push").count == pushesBefore, "nothing to tell the server")
        #expect(try await device.store.get(Person.self, bad) == nil)
        #expect(try await device.store.outboxSummary().rejected == 0)
        try await device.engine.signOut(unsentChanges: .refuse)
    }

    @Test func aSpentRetryBudgetHoldsOnlyItsOwnEntry() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        let first = try await device.store.create(Person(name: "refused again and again"))
        for _ in 0..<5 {
            device.network.inject(.status(404, retryAfter: nil)) { $0.target.hasPrefix("/v1/push") }
            await #expect(throws: SyncFailure.self) { try await device.engine.sync() }
        }
        #expect(try await device.store.outboxEntries().first?.failures == 5)
        let later = try await device.store.create(Person(name: "captured later"))
        let report = try await device.engine.sync()
        #expect(report.rejected.map(\.record.uuid) == [first])
        #expect(try await device.store.get(Person.self, first)?.rejection?.code == "retry_budget_spent")
        #expect(try await device.store.get(Person.self, later)?.syncState == .synced, "the later capture is not held")
        #expect(try harness.serverRecords().map(\.uuid) == [later.wireText])
    }

    @Test func aRefusedPushStillLetsThePullRun() async throws {
        let harness = try SyncHarness()
        let colleague = try harness.device("u-1", name: "colleague")
        try await colleague.store.create(Person(name: "From a colleague"))
        try await colleague.engine.sync()
        let device = try harness.device("u-1")
        try await device.store.create(Person(name: "Ana"))
        device.network.inject(.status(404, retryAfter: nil)) { $0.target.hasPrefix("/v1/push") }
        await #expect(throws: SyncFailure.self) { try await device.engine.sync() }
        #expect(try await device.store.query(Person.self).contains { $0.value.name == "From a colleague" })
    }
}
