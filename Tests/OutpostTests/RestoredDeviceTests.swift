import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostSQLite
import OutpostTesting
import Testing

/// A phone restored from a backup, a reinstall that brings the database
/// back, a profile copied to a second computer: the device numbers new
/// changes with seqs the server already used for others. Every capture made
/// after the restore must reach the server exactly once, and no local row
/// may ever take another record's data.
@Suite("Restored and cloned devices", .timeLimit(.minutes(5)))
struct RestoredDeviceTests {
    /// Copies a device database the way a backup does (a consistent snapshot).
    static func backup(_ path: String, to copy: String) throws {
        let connection = try SQLiteConnection(path: path)
        _ = try connection.run("VACUUM INTO ?", [.text(copy)])
    }

    /// Puts a backup back in place of a device database (the store is closed).
    static func restore(_ copy: String, to path: String) throws {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        try FileManager.default.copyItem(atPath: copy, toPath: path)
    }

    /// A phone that captured `before` and synced, was backed up, captured
    /// `after` and synced, and now runs again on the backup. `meanwhile`
    /// runs between the last sync and the restore (time passing on the server).
    static func restoredPhone(
        _ harness: SyncHarness, before: [String], after: [String], meanwhile: () throws -> Void = {}
    ) async throws -> (original: SyncHarness.Device, restored: SyncHarness.Device) {
        let phone = try harness.device("u-1", name: "phone")
        for name in before { try await phone.store.create(Person(name: name)) }
        try await phone.engine.sync()
        let backup = harness.directory.path("phone-backup.sqlite")
        try Self.backup(phone.store.path, to: backup)
        for name in after { try await phone.store.create(Person(name: name)) }
        try await phone.engine.sync()
        await phone.engine.stop()
        await phone.store.close()
        try meanwhile()
        try Self.restore(backup, to: phone.store.path)
        // The same database, so the same client id; new ids as on a real phone.
        return (phone, try harness.device("u-1", name: "phone", seed: 99))
    }

    @Test func aRestoredBackupLosesNoCaptureAndMixesNoRows() async throws {
        let harness = try SyncHarness()
        let (phone, restored) = try await Self.restoredPhone(harness, before: ["A"], after: ["B", "C"])
        #expect(restored.store.clientID == phone.store.clientID)
        let d = try await restored.store.create(Person(name: "D"))
        let e = try await restored.store.create(Person(name: "E"))
        let report = try await restored.engine.sync()
        #expect(report.duplicates == 0, "D and E are new changes, never 'already on the server'")
        #expect(report.confirmed == 2)

        let names = try harness.serverRecords().compactMap { $0.data }.map { try JSONValue.parse($0).objectValue?["name"] }
        #expect(names == ["A", "B", "C", "D", "E"].map { JSONValue.string($0) }, "every capture on the server exactly once")
        #expect(try await restored.store.get(Person.self, d)?.value.name == "D", "D keeps its own data")
        #expect(try await restored.store.get(Person.self, e)?.value.name == "E", "E keeps its own data")
        #expect(try await restored.store.get(Person.self, d)?.syncState == .synced)
        // The server's 409 was answered once, then everything went through.
        let pushes = restored.network.delivered(to: "/v1/push")
        #expect(pushes.count == 2, "one refused push naming the reused seqs, one with new seqs")
        #expect(try await restored.store.outboxEntries().isEmpty)
        // B and C were written under this client id after the backup: this
        // database never held their answers, and its pull brings them.
        let held = try await restored.store.query(Person.self, orderBy: [.ascending(\.name)]).map(\.value.name)
        #expect(held == ["A", "B", "C", "D", "E"], "the restored phone holds every record")
    }

    @Test func aBackupOlderThanTheResultsRetentionStillLosesNothing() async throws {
        var config = try ServerConfig()
        config.resultRetention = 86_400
        let harness = try SyncHarness(config: config)
        let (_, restored) = try await Self.restoredPhone(harness, before: ["A"], after: ["B"]) {
            // Results are purged after a day; the id each seq was used for is kept.
            harness.serverClock.advance(by: 10 * 86_400)
            try harness.server.runMaintenance()
        }
        let c = try await restored.store.create(Person(name: "C"))
        try await restored.engine.sync()
        #expect(try harness.serverRecords().count == 3)
        #expect(try await restored.store.get(Person.self, c)?.value.name == "C")
        #expect(try await restored.store.get(Person.self, c)?.syncState == .synced)
    }

    /// A laptop that synced one capture, whose profile folder is then
    /// copied to a desktop: both open the same database, same client id.
    static func copiedProfile(_ harness: SyncHarness) async throws -> (laptop: SyncHarness.Device, desktop: SyncHarness.Device) {
        let original = try harness.device("u-1", name: "laptop")
        try await original.store.create(Person(name: "Before the copy"))
        try await original.engine.sync()
        await original.engine.stop()
        await original.store.close()
        try FileManager.default.copyItem(atPath: original.store.path, toPath: harness.directory.path("desktop.sqlite"))
        return (try harness.device("u-1", name: "laptop", seed: 1), try harness.device("u-1", name: "desktop", seed: 2))
    }

    @Test func aBackupOlderThanTheIdMapIsRenumberedAndStillDeduplicated() async throws {
        var config = try ServerConfig()
        config.resultRetention = 86_400
        config.tombstoneHorizon = 2 * 86_400
        let harness = try SyncHarness(config: config)
        let phone = try harness.device("u-1", name: "phone")
        let a = try await phone.store.create(Person(name: "A"))
        let backup = harness.directory.path("phone-backup.sqlite")
        // The backup holds A sent but never confirmed (its answer was lost).
        phone.network.inject(.dropResponse) { $0.target.hasPrefix("/v1/push") }
        await #expect(throws: SyncFailure.noAnswer) { try await phone.engine.sync() }
        try Self.backup(phone.store.path, to: backup)
        try await phone.store.create(Person(name: "B"))
        try await phone.engine.sync()
        await phone.engine.stop()
        await phone.store.close()
        // Past every horizon: the server no longer knows which id seq 1 was.
        harness.serverClock.advance(by: 30 * 86_400)
        try harness.server.runMaintenance()

        try Self.restore(backup, to: phone.store.path)
        let restored = try harness.device("u-1", name: "phone", seed: 99)
        try await restored.engine.sync()
        // Renumbered, then recognised by uuid as the same client's create.
        #expect(try harness.serverRecords().count == 2, "A once, B once")
        #expect(try await restored.store.get(Person.self, a)?.syncState == .synced)
    }

    /// A laptop holding a person the server refuses whole (a value nested
    /// too deep), its profile then copied to a desktop; the laptop and the
    /// desktop reopened. `refusedBeforeTheCopy`: the laptop sent it (and
    /// was refused) before the copy.
    static func copiedWithACreateTheServerRefuses(_ harness: SyncHarness, refusedBeforeTheCopy: Bool) async throws
        -> (laptop: SyncHarness.Device, desktop: SyncHarness.Device, record: UUID)
    {
        let laptop = try harness.device("u-1", name: "laptop")
        var deep = JSONValue.string("deep")
        for _ in 0..<31 { deep = .array([deep]) }
        let record = try await laptop.store.create(in: "people", ["name": "Malformed", "notes": deep])
        if refusedBeforeTheCopy {
            let refused = try await laptop.engine.sync()
            #expect(refused.rejected.map(\.record.uuid) == [record], "refused whole, then narrowed down to it")
        }
        await laptop.engine.stop()
        await laptop.store.close()
        try FileManager.default.copyItem(atPath: laptop.store.path, toPath: harness.directory.path("desktop.sqlite"))
        return (try harness.device("u-1", name: "laptop", seed: 1), try harness.device("u-1", name: "desktop", seed: 2), record)
    }

    /// A create the server refused, copied with the profile; the laptop
    /// fixes it and it reaches the server; the desktop still shows the
    /// refused copy, and the person deletes it there. The delete must reach
    /// the server: dropping the row on the desktop alone left the server's
    /// copy, never pulled again, missing from the desktop for good
    /// (simulation seed 1119).
    @Test func aRefusedCreateFixedOnTheOtherCopyIsDeletedOnTheServerWhenThisCopyDeletesIt() async throws {
        let harness = try SyncHarness()
        let (fixed, desktop, record) = try await Self.copiedWithACreateTheServerRefuses(harness, refusedBeforeTheCopy: true)

        try await fixed.store.update(in: "people", record, patch: ["notes": "fixed"])
        _ = try await fixed.engine.sync()
        #expect(try harness.serverRecords().filter { $0.uuid == record.wireText && !$0.deleted }.count == 1)

        let pulled = try await desktop.engine.sync()
        #expect(pulled.keptLocal == 1, "the desktop keeps the refused copy the person sees")
        try await desktop.store.delete(in: "people", record)
        _ = try await desktop.engine.sync()
        #expect(try harness.serverRecords().first { $0.uuid == record.wireText }?.deleted == true, "the delete reached the server")
        _ = try await fixed.engine.sync()
        #expect(try await fixed.store.get(in: "people", record) == nil, "and the other copy")
        #expect(try await desktop.store.get(in: "people", record) == nil)
    }

    /// The same refused create, with a visit captured for it on the copy
    /// (held while its person is refused): once the server's copy of the
    /// person arrives, the visit goes, without waiting for another sync
    /// (simulation seed 534).
    @Test func aChildHeldBehindARefusedCreateGoesOnceTheOtherCopyHasSentIt() async throws {
        let harness = try SyncHarness()
        let (fixed, desktop, person) = try await Self.copiedWithACreateTheServerRefuses(harness, refusedBeforeTheCopy: false)

        let refused = try await desktop.engine.sync()
        #expect(refused.rejected.map(\.record.uuid) == [person])
        let visit = try await desktop.store.create(in: "visits", ["person": .string(person.wireText), "visited_at": "2026-12-03T09:00:00Z"])
        let held = try await desktop.engine.sync()
        #expect(held.held.map(\.entry.record.uuid) == [visit], "the visit waits for its refused person")

        try await fixed.store.update(in: "people", person, patch: ["notes": "fixed"])
        _ = try await fixed.engine.sync()
        _ = try await desktop.engine.sync()
        try await eventually("the visit reaches the server") {
            try harness.serverRecords("visits").contains { $0.uuid == visit.wireText && !$0.deleted }
        }
        try await eventually("the desktop's queue drains") { try await desktop.store.outboxEntries().isEmpty }
    }

    @Test func twoClonesCapturingInParallelBothReachTheServer() async throws {
        let harness = try SyncHarness()
        let (first, second) = try await Self.copiedProfile(harness)
        #expect(first.store.clientID == second.store.clientID, "a copy is the same client")
        for index in 0..<3 {
            try await first.store.create(Person(name: "laptop \(index)"))
            try await second.store.create(Person(name: "desktop \(index)"))
        }
        try await first.engine.sync()
        try await second.engine.sync()
        try await first.store.create(Person(name: "laptop later"))
        try await first.engine.sync()
        try await second.engine.sync()
        let names = Set(try harness.serverRecords().compactMap(\.data))
        #expect(names.count == 8, "1 before the copy + 3 + 3 + 1, each once")
        // Each copy's pull brings the other's writes, made under the same client id.
        try await first.engine.sync()
        for device in [first, second] { #expect(try await device.store.query(Person.self).count == 8) }
        for device in [first, second] {
            for record in try await device.store.query(Person.self) where record.syncState == .synced {
                let server = try harness.serverRecords().first { $0.uuid == record.uuid.wireText }
                #expect(server?.data?.contains(record.value.name) == true, "no local row shows another record's data")
            }
        }
    }

    /// A copy whose every queued change carries a seq the other copy used
    /// for something else, sent one change per batch: each batch meets
    /// `client_behind` once and is renumbered. That is progress, and one
    /// cycle sends them all (the simulation's seeds 2726 and 5543 found a
    /// cycle giving up after three).
    @Test func aCopyRenumbersChangeAfterChangeInOneCycle() async throws {
        let harness = try SyncHarness()
        // The copy numbers six captures 2-7 in a push that never arrives.
        let (laptop, desktop) = try await Self.copiedProfile(harness)
        for index in 0..<6 { try await desktop.store.create(Person(name: "desktop \(index)")) }
        desktop.network.inject(.dropRequest) { $0.target.hasPrefix("/v1/push") }
        await #expect(throws: SyncFailure.noAnswer) { try await desktop.engine.sync() }
        await desktop.engine.stop()
        await desktop.store.close()
        // The original uses 2-7 for its own.
        for index in 0..<6 { try await laptop.store.create(Person(name: "laptop \(index)")) }
        try await laptop.engine.sync()
        var oneAtATime = SyncOptions()
        oneAtATime.pushBatchSize = 1
        let reopened = try harness.device("u-1", name: "desktop", options: oneAtATime, seed: 3)
        let report = try await reopened.engine.sync()
        #expect(report.failure == nil)
        #expect(report.confirmed == 6)
        #expect(Set(try harness.serverRecords().compactMap(\.data)).count == 13, "1 before the copy + 6 + 6, each once")
    }

    @Test func aLost409AnswerIsSafeToRepeat() async throws {
        let harness = try SyncHarness()
        let (_, restored) = try await Self.restoredPhone(harness, before: ["A"], after: ["B"])
        try await restored.store.create(Person(name: "C"))
        // The 409 is produced, then lost on the way back.
        restored.network.inject(.dropResponse) { $0.target.hasPrefix("/v1/push") }
        await #expect(throws: SyncFailure.noAnswer) { try await restored.engine.sync() }
        #expect(try harness.serverRecords().count == 2, "a refused push applied nothing")
        try await restored.engine.sync()
        #expect(try harness.serverRecords().count == 3)
        #expect(try await restored.store.outboxEntries().isEmpty)
    }

    /// Against a server that answers a reused seq `duplicate` with another
    /// mutation's record (what every server did before the id check), the
    /// device refuses the answer instead of copying B's data into D's row.
    @Test func aResultForAnotherRecordIsNeverAdopted() async throws {
        let harness = try SyncHarness()
        let phone = try harness.device("u-1", name: "phone")
        let d = try await phone.store.create(Person(name: "D"))
        let batch = try #require(try await phone.store.takePushBatch())
        let other = WireRecord(
            collection: "people", uuid: UUID(), id: 7, version: 3, updatedAt: ServerTimestamp(Date()), deleted: false,
            owner: "u-1", team: "t-1", data: ["name": .string("B")])
        let answer = PushResponse(
            results: [MutationResult(seq: 1, id: batch.entries[0].mutationID, status: .duplicate, record: other, originalStatus: .applied)],
            lastSeq: 1, serverTime: ServerTimestamp(Date()))
        await #expect(throws: OutboxError.self) { try await phone.store.settle(batch, with: answer) }
        #expect(try await phone.store.get(Person.self, d)?.value.name == "D")
        #expect(await phone.store.inFlightBatch == nil, "the lease ended anyway")
        #expect(try await phone.store.outboxEntries().first?.seq == 1, "still queued with its seq")
    }
}
