import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostSQLite
import OutpostTesting
import Testing

/// A delete of a record whose create this database never sent normally
/// cancels the create and tells the server nothing. These tests are the
/// cases where "never sent" is not true: a restored backup whose replaced
/// timeline sent the create, and a sent create whose stored entry broke.
/// The deleted record must never come back.
@Suite("Creates the device cannot know the fate of", .timeLimit(.minutes(5)))
struct DoubtfulCreateTests {
    /// A phone that synced A, was backed up with B captured but unsent,
    /// then sent B, and now runs again on the backup (B unsent there).
    static func phoneRestoredWithBUnsent(_ harness: SyncHarness) async throws -> (restored: SyncHarness.Device, b: UUID) {
        let phone = try harness.device("u-1", name: "phone")
        try await phone.store.create(Person(name: "A"))
        try await phone.engine.sync()
        let b = try await phone.store.create(Person(name: "B"))
        let restored = try await restoredAfterSyncing(phone, harness)
        #expect(try await restored.store.outboxEntries().map(\.op) == [.create], "B is queued as never sent here")
        return (restored, b)
    }

    /// Backs the phone up as it is now, lets it sync, then puts the backup
    /// back: the phone as a restore leaves it.
    static func restoredAfterSyncing(_ phone: SyncHarness.Device, _ harness: SyncHarness) async throws -> SyncHarness.Device {
        let backup = harness.directory.path("phone-backup.sqlite")
        try RestoredDeviceTests.backup(phone.store.path, to: backup)
        try await phone.engine.sync()
        await phone.engine.stop()
        await phone.store.close()
        try RestoredDeviceTests.restore(backup, to: phone.store.path)
        return try harness.device("u-1", name: "phone", seed: 99)
    }

    static func live(_ harness: SyncHarness) throws -> [String] {
        try harness.serverRecords().filter { !$0.deleted }.compactMap(\.data).compactMap {
            try JSONValue.parse($0).objectValue?["name"]?.stringValue
        }
    }

    static func doubts(_ path: String) throws -> [(uuid: String, cancelledAfterSeq: Int64?)] {
        let raw = try SQLiteConnection(path: path)
        defer { raw.close() }
        return try raw.query("SELECT record_uuid, cancelled_after_seq FROM doubtful_creates") {
            ($0.string(0), $0.optionalInt64(1))
        }
    }

    @Test func aRestoredCreateDeletedBeforeThePushIsDeletedOnTheServer() async throws {
        let harness = try SyncHarness()
        let (restored, b) = try await Self.phoneRestoredWithBUnsent(harness)
        try await restored.store.delete(Person.self, b)
        #expect(try await restored.store.outboxEntries().isEmpty, "cancelled locally, as for any unsent create")
        try await restored.store.create(Person(name: "C"))
        // The push meets 409 (the backup's seqs were used): B's cancelled
        // create becomes a delete, C is renumbered.
        try await restored.engine.sync()
        #expect(try Self.live(harness).sorted() == ["A", "C"], "B's delete goes with C, before any pull")
        try await restored.engine.sync()
        #expect(try Self.live(harness).sorted() == ["A", "C"], "B stays deleted, C arrives once")
        #expect(try await restored.store.get(Person.self, b) == nil)
        #expect(try await restored.store.outboxEntries().isEmpty)
        #expect(try Self.doubts(restored.store.path).isEmpty, "nothing left in doubt")
    }

    @Test func aRestoredCreateDeletedWithNothingElseToSendIsDeletedWhenThePullBringsItBack() async throws {
        let harness = try SyncHarness()
        let (restored, b) = try await Self.phoneRestoredWithBUnsent(harness)
        try await restored.store.delete(Person.self, b)
        // Nothing to push, so no 409: the pull shows the server holds B.
        try await restored.engine.sync()
        #expect(try await restored.store.get(Person.self, b) == nil, "B does not reappear, even for a moment")
        try await restored.engine.sync()
        #expect(try Self.live(harness) == ["A"], "B is deleted on the server")
        #expect(try await restored.store.get(Person.self, b) == nil)
        #expect(try await restored.store.outboxEntries().isEmpty)
        #expect(try await restored.store.query(Person.self).map(\.value.name) == ["A"])
    }

    @Test func anOfflineCreateAndDeleteSendNothingAndTheDoubtEndsWithTheNextPush() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        try await device.store.create(Person(name: "A"))
        try await device.engine.sync()
        let gone = try await device.store.create(Person(name: "typo"))
        try await device.store.delete(Person.self, gone)
        #expect(try await device.store.outboxEntries().isEmpty)
        #expect(try Self.doubts(device.store.path).map(\.cancelledAfterSeq) == [1], "kept until a push proves no copy sent it")
        try await device.store.create(Person(name: "C"))
        try await device.engine.sync()
        #expect(try Self.doubts(device.store.path).isEmpty, "the server accepted seq 2 as this client's: no copy sent anything")
        let deletes = device.network.delivered(to: "/v1/push").filter { String(decoding: $0.body ?? Data(), as: UTF8.self).contains("\"delete\"") }
        #expect(deletes.isEmpty, "the server never hears of the cancelled record")
        #expect(try Self.live(harness).sorted() == ["A", "C"])
    }

    /// A device whose create of V was sent and its answer lost (the server
    /// holds V, the device does not know), then V's queued entry broken on disk.
    static func sentCreateWhoseEntryBroke(_ harness: SyncHarness) async throws -> (device: SyncHarness.Device, v: UUID) {
        let device = try harness.device("u-1")
        let v = try await device.store.create(Person(name: "V"))
        device.network.inject(.dropResponse) { $0.target.hasPrefix("/v1/push") }
        await #expect(throws: SyncFailure.noAnswer) { try await device.engine.sync() }
        let raw = try SQLiteConnection(path: device.store.path)
        _ = try raw.run("UPDATE outbox SET data = '{\"broken' WHERE record_uuid = ?", [.text(v.wireText)])
        raw.close()
        return (device, v)
    }

    @Test func aSentCreateWhoseEntryBrokeIsDeletedOnTheServerWhenDeletedLocally() async throws {
        let harness = try SyncHarness()
        let (device, v) = try await Self.sentCreateWhoseEntryBroke(harness)
        #expect(try Self.live(harness) == ["V"])
        // The delete reads V's queue, meets the damaged entry and repairs it
        // first: the rebuilt create may be a resend, so it is not cancelled.
        try await device.store.delete(Person.self, v)
        #expect(try await device.store.outboxEntries().map(\.op) == [.delete])
        try await device.engine.sync()
        #expect(try Self.live(harness).isEmpty, "V is deleted on the server")
        #expect(try await device.store.get(Person.self, v) == nil)
        #expect(try await device.store.outboxEntries().isEmpty)
    }

    /// A sent create whose entry broke is queued again and kept in doubt;
    /// the server's answer to it ends the doubt (settling forgets doubts
    /// only when some exist, so this is the path that does).
    @Test func aSentCreateWhoseEntryBrokeArrivesOnceAndIsNoLongerInDoubt() async throws {
        let harness = try SyncHarness()
        let (device, v) = try await Self.sentCreateWhoseEntryBroke(harness)
        try await device.engine.sync()
        #expect(try Self.live(harness) == ["V"], "V arrives once")
        #expect(try await device.store.get(Person.self, v)?.syncState == .synced)
        #expect(try await device.store.outboxEntries().isEmpty)
        #expect(try Self.doubts(device.store.path).isEmpty, "nothing left in doubt")
    }

    /// The backup was taken before the phone ever synced: after the restore
    /// its queue is the very queue the replaced timeline sent, so the push
    /// is answered `duplicate` throughout. That proves nothing about the
    /// create cancelled beside it; the pull then shows the server holds it.
    @Test func duplicatesOnlyNeverForgiveACancelledCreate() async throws {
        let harness = try SyncHarness()
        let phone = try harness.device("u-1", name: "phone")
        try await phone.store.create(Person(name: "A"))
        let b = try await phone.store.create(Person(name: "B"))
        let restored = try await Self.restoredAfterSyncing(phone, harness)
        try await restored.store.delete(Person.self, b)
        let report = try await restored.engine.sync()
        #expect(report.duplicates == 1, "A: sent by the replaced timeline under the same id")
        try await restored.engine.sync()
        #expect(try Self.live(harness) == ["A"], "B is deleted on the server")
        #expect(try await restored.store.query(Person.self).map(\.value.name) == ["A"])
    }

    /// Seed 20037: confirming a create read the record's queue, stepped over
    /// a damaged later edit, took the queue for empty and put the server's
    /// older copy over the edit before the repair could read it.
    @Test func aConfirmationNeverStepsOverADamagedLaterEdit() async throws {
        let harness = try SyncHarness()
        // One change per push: the resent create fills the batch, so choosing
        // it never reads the damaged edit behind it.
        var options = SyncOptions()
        options.periodicInterval = nil
        options.pushBatchSize = 1
        let device = try harness.device("u-1", options: options)
        let a = try await device.store.create(Person(name: "A"))
        device.network.inject(.dropResponse) { $0.target.hasPrefix("/v1/push") }
        await #expect(throws: SyncFailure.noAnswer) { try await device.engine.sync() }
        try await device.store.update(Person.self, a) { $0.phone = "555" }
        let raw = try SQLiteConnection(path: device.store.path)
        _ = try raw.run("UPDATE outbox SET data = '{\"broken' WHERE record_uuid = ? AND op = 'update'", [.text(a.wireText)])
        raw.close()
        try await device.engine.sync()
        try await device.engine.sync()
        let onServer = try #require(try harness.serverRecords().first { $0.uuid == a.wireText })
        #expect(onServer.data?.contains("555") == true, "the edit reached the server: \(onServer)")
        #expect(try await device.store.get(Person.self, a)?.value.phone == "555")
        #expect(try await device.store.get(Person.self, a)?.syncState == .synced)
    }
}
