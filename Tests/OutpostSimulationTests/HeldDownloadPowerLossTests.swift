import Foundation
import Outpost
import OutpostCore
import OutpostSimulation
import OutpostSQLite
import OutpostTesting
import Testing

/// A download holds its checkpoints until its last page: its pages are only
/// in the WAL meanwhile, and they commit without a flush (the server holds
/// them). A power loss mid-download takes the pages not yet on the disk
/// together with their cursor, never more: what is left is consistent and
/// the download resumes from the cursor that survived. The last page syncs,
/// so the whole download is on the disk when it ends, and stays there
/// through the one checkpoint that copies it.
@Suite("A held download and power loss", .timeLimit(.minutes(3)))
struct HeldDownloadPowerLossTests {
    static let time = ServerTimestamp(rawValue: "2026-12-06T10:00:00.000000Z")

    static func page(_ number: Int, of pages: Int, records: Int = 2_000) throws -> RawPullPage {
        let changes = (0..<records).map { offset -> PullChange in
            let version = Int64(number * records + offset + 1)
            return .record(
                WireRecord(
                    collection: "people", uuid: UUID(), id: version, version: version, updatedAt: time, deleted: false,
                    owner: "u-1", team: "t-1", data: ["name": .string("Person \(version)"), "notes": .string(String(repeating: "n", count: 300))]))
        }
        return try RawPullPage(
            PullResponse(changes: changes, cursor: PullCursor(rawValue: "c\(number)"), hasMore: number < pages - 1, serverTime: time))
    }

    static func reopened(_ path: String, _ disk: FaultyDisk, after store: LocalStore) async throws -> LocalStore {
        disk.losePower()
        await store.close()
        disk.powerOn()
        return try LocalStore(path: path, collections: PowerLossTests.collections, vfs: disk.name)
    }

    @Test func aPowerLossMidDownloadLeavesAConsistentPrefixAndTheEndedDownloadIsKept() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let disk = try PowerLossTests.deviceDisk(path)
        var store = try LocalStore(path: path, collections: PowerLossTests.collections, vfs: disk.name)
        for number in 0..<4 { try await store.applyPull(Self.page(number, of: 8), collections: ["people"]) }
        #expect(await store.idleCheckpoints?.completed == 0, "the download's pages are in the WAL only")

        // The power goes the instant the fourth page's commit returned: the
        // records left are exactly the pages up to the cursor that survived.
        store = try await Self.reopened(path, disk, after: store)
        let cursor = try await store.pullState(collections: ["people"]).cursor
        let kept = cursor.map { Int($0.rawValue.dropFirst())! + 1 } ?? 0
        #expect(kept <= 4)
        #expect(try await store.query(RecordQuery("people")).count == kept * 2_000, "records and cursor went together")
        #expect(try await store.integrityProblems().isEmpty)

        // The download resumes from that cursor; its last page syncs, and its
        // one checkpoint copies it all.
        for number in kept..<8 { try await store.applyPull(Self.page(number, of: 8), collections: ["people"]) }
        let resumed = store
        try await eventually("the checkpoint after the last page") { await resumed.idleCheckpoints?.completed ?? 0 >= 1 }
        store = try await Self.reopened(path, disk, after: store)
        #expect(try await store.query(RecordQuery("people")).count == 16_000)
        #expect(try await store.pullState(collections: ["people"]).cursor == PullCursor(rawValue: "c7"))
        #expect(try await store.integrityProblems().isEmpty)
        await store.close()
    }

    /// The power goes the instant a download's last page committed, before
    /// its checkpoint: the whole download is there (the last page's sync
    /// took every page before it along).
    @Test func anEndedDownloadIsOnTheDiskBeforeItsCheckpoint() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let disk = try PowerLossTests.deviceDisk(path)
        var store = try LocalStore(path: path, collections: PowerLossTests.collections, vfs: disk.name)
        for number in 0..<4 { try await store.applyPull(Self.page(number, of: 4), collections: ["people"]) }
        store = try await Self.reopened(path, disk, after: store)
        #expect(try await store.query(RecordQuery("people")).count == 8_000)
        #expect(try await store.pullState(collections: ["people"]).cursor == PullCursor(rawValue: "c3"))
        #expect(try await store.integrityProblems().isEmpty)
        await store.close()
    }
}
