import Foundation
import Outpost
import OutpostCore
import OutpostSimulation
import OutpostSQLite
import OutpostTesting
import Testing

/// The store copies its WAL back into the database file in the pauses
/// between writes, on a connection of its own, so an app's write does not
/// wait for that copy and its syncs; under writes without a pause, or when
/// the copy fails, the WAL stays bounded.
@Suite("Checkpoints in the pauses between writes", .timeLimit(.minutes(3)))
struct IdleCheckpointTests {
    /// A WAL frame: a page and its 24-byte header.
    static let frameBytes = 4_096 + 24

    static func open(_ path: String, _ disk: FaultyDisk? = nil, durability: Durability = .powerLoss) throws -> LocalStore {
        try LocalStore(
            path: path, collections: StoreFixture.collections, ids: UUIDv7Generator.seeded(7, clock: SystemWallClock()),
            vfs: disk?.name, durability: durability)
    }

    static func walBytes(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path + "-wal"))?[.size] as? Int) ?? 0
    }

    /// The rows the database file itself holds, without its WAL: what
    /// checkpoints copied there.
    static func rowsInTheFile(_ path: String) throws -> Int {
        let file = try SQLiteConnection(path: path, readOnly: true, immutable: true)
        defer { file.close() }
        return try file.first("SELECT count(*) FROM people") { Int($0.int64(0)) } ?? 0
    }

    @Test func writesPastTheThresholdAreCopiedIntoTheFileInThePauseAfterThem() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let store = try Self.open(path)
        #expect(await store.idleCheckpoints?.completed == 0)
        // Four pages a create (the record, its index entry, the outbox
        // entry and its index): 400 creates pass the 1,000-page threshold.
        for index in 0..<400 { try await store.create(Person(name: "p\(index)")) }
        try await eventually("a checkpoint ran in the pause") { await store.idleCheckpoints?.completed ?? 0 >= 1 }
        #expect(await store.idleCheckpoints?.failed == 0)
        #expect(try Self.rowsInTheFile(path) > 0, "the checkpoint copied committed records into the database file")
        await store.close()
        // The checkpointing connection closed first: the store's own close
        // was the last and removed the WAL.
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        #expect(try Self.rowsInTheFile(path) == 400)
    }

    @Test func aSteadyStreamOfWritesKeepsTheWALBounded() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let store = try Self.open(path)
        var largest = 0
        for index in 0..<2_500 {
            try await store.create(Person(name: "p\(index)"))
            if index % 50 == 0 { largest = max(largest, Self.walBytes(path)) }
        }
        largest = max(largest, Self.walBytes(path))
        // No pause here: the writer checkpoints itself at the backstop
        // (4,000 pages), so the WAL holds about that plus one write's pages.
        // A commit's checkpoint that meets the idle checkpointer's own (on a
        // loaded machine) is passed over and the next commit's tries again:
        // a few writes' pages more, never the 10,000 and more of 2,500
        // creates left unchecked.
        #expect(largest <= 4_040 * Self.frameBytes, "WAL reached \(largest) bytes")
        #expect(try await store.query(Person.self).count == 2_500)
        await store.close()
        #expect(try Self.rowsInTheFile(path) == 2_500)
    }

    /// Checkpoints end with a sync of the database file; in a store whose
    /// commits do not sync (crash-only), a disk that fails syncs fails every
    /// checkpoint while writes go on.
    @Test func checkpointsThatFailLoseNothingAndResumeOnceTheDiskHeals() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let disk = FaultyDisk()
        let store = try Self.open(path, disk, durability: .processCrash)
        disk.fail(.syncs)
        for index in 0..<900 { try await store.create(Person(name: "p\(index)")) }
        try await eventually("a checkpoint failed") { await store.idleCheckpoints?.failed ?? 0 >= 1 }
        #expect(disk.injected > 0)
        #expect(try await store.query(Person.self).count == 900, "every write was kept")
        disk.heal()
        for index in 900..<1_400 { try await store.create(Person(name: "p\(index)")) }
        try await eventually("a checkpoint ran once the disk healed") { await store.idleCheckpoints?.completed ?? 0 >= 1 }
        #expect(try await store.integrityProblems().isEmpty)
        await store.close()
        let reopened = try Self.open(path)
        #expect(try await reopened.query(Person.self).count == 1_400)
        await reopened.close()
    }

    /// A durable store syncs every commit: while the disk fails syncs, a
    /// write is refused (the person sees it fail; it was never promised),
    /// nothing already written is lost, and writes go on once it heals.
    @Test func aDurableStoreRefusesWritesWhileSyncsFailAndLosesNothing() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let disk = FaultyDisk()
        let store = try Self.open(path, disk)
        for index in 0..<50 { try await store.create(Person(name: "before \(index)")) }
        disk.fail(.syncs)
        await #expect(throws: StoreError.self) { try await store.create(Person(name: "while syncs fail")) }
        #expect(disk.injected > 0)
        disk.heal()
        for index in 0..<50 { try await store.create(Person(name: "after \(index)")) }
        #expect(try await store.query(Person.self).count == 100, "the refused write is not there, every other one is")
        #expect(try await store.integrityProblems().isEmpty)
        await store.close()
        let reopened = try Self.open(path)
        #expect(try await reopened.query(Person.self).count == 100)
        await reopened.close()
    }

    @Test func aBulkCommitStartsTheCopyAtOnceAndOnlyTheBackstopStopsTheWriter() {
        typealias Checkpointer = IdleCheckpointer
        let bulk = Checkpointer.bulkCommitPages
        // A small WAL asks for nothing, whatever the commit.
        #expect(Checkpointer.step(walPages: 300, before: 0) == .none)
        // Past the threshold, a small commit waits for a pause; a bulk one does not.
        #expect(Checkpointer.step(walPages: 1_003, before: 1_000) == .afterPause)
        #expect(Checkpointer.step(walPages: 1_000 + bulk, before: 1_000) == .atOnce)
        // A WAL that started again counts all its pages as the commit's.
        #expect(Checkpointer.step(walPages: 1_200, before: 5_000) == .atOnce)
        // The writer checkpoints itself at the backstop, later under bulk commits.
        #expect(Checkpointer.step(walPages: Checkpointer.backstop, before: Checkpointer.backstop - 3) == .inCommit)
        #expect(Checkpointer.step(walPages: Checkpointer.backstop + bulk, before: Checkpointer.backstop) == .atOnce)
        #expect(Checkpointer.step(walPages: Checkpointer.bulkBackstop, before: Checkpointer.bulkBackstop - bulk) == .inCommit)
    }

    @Test func aHeldLoadLeavesItsPagesInTheWALUpToItsBackstop() {
        typealias Checkpointer = IdleCheckpointer
        let held = Checkpointer.heldBackstop
        #expect(Checkpointer.step(walPages: Checkpointer.bulkBackstop + 500, before: Checkpointer.bulkBackstop, held: true) == .none)
        #expect(Checkpointer.step(walPages: 1_003, before: 1_000, held: true) == .none)
        #expect(Checkpointer.step(walPages: held - 1, before: held - 600, held: true) == .none)
        // Past its backstop it checkpoints beside the writes, and in them only if those fall far behind.
        #expect(Checkpointer.step(walPages: held + 300, before: held - 300, held: true) == .atOnce)
        #expect(Checkpointer.step(walPages: held + 3, before: held, held: true) == .atOnce)
        #expect(Checkpointer.step(walPages: held + Checkpointer.bulkBackstop, before: held, held: true) == .inCommit)
    }

    static func downloadPage(_ page: Int, of pages: Int, _ version: inout Int64) throws -> RawPullPage {
        let time = ServerTimestamp(rawValue: "2026-11-29T10:00:00.123456Z")
        let notes = String(repeating: "n", count: 400)
        let changes = (0..<2_500).map { _ -> PullChange in
            version += 1
            return .record(
                WireRecord(
                    collection: "people", uuid: UUID(), id: version, version: version, updatedAt: time, deleted: false,
                    owner: "u-1", team: "t-1", data: ["name": .string("p\(version)"), "notes": .string(notes)]))
        }
        return try RawPullPage(PullResponse(changes: changes, cursor: PullCursor(rawValue: "c\(page)"), hasMore: page < pages - 1, serverTime: time))
    }

    /// A download of many pages writes them back to back: no checkpoint
    /// takes the disk and the cores from it while pages are to come, every
    /// commit is in the WAL, and one checkpoint copies them all in the
    /// pause after the last page.
    @Test func aDownloadsPagesStayInTheWALUntilItsLastPageThenOneCheckpointCopiesThem() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let store = try Self.open(path)
        var largest = 0
        var version: Int64 = 0
        for page in 0..<10 {
            try await store.applyPull(Self.downloadPage(page, of: 10, &version), collections: ["people"])
            largest = max(largest, Self.walBytes(path))
            if page < 9 {
                #expect(await store.idleCheckpoints?.completed == 0, "no checkpoint while pages are to come")
                // The file may not hold the table yet: the store's schema is in the WAL too.
                #expect((try? Self.rowsInTheFile(path)) ?? 0 == 0, "the pages are in the WAL")
            }
        }
        // 25,000 records of ~450 bytes, about 300 WAL pages a page of 2,500: all of them, never restarted.
        #expect(largest > 3_000 * Self.frameBytes, "WAL reached \(largest) bytes")
        try await eventually("one checkpoint in the pause after the last page") { await store.idleCheckpoints?.completed ?? 0 >= 1 }
        #expect(await store.idleCheckpoints?.failed == 0)
        #expect(await store.idleCheckpoints?.besideWrites == 0)
        #expect(try Self.rowsInTheFile(path) == 25_000, "the checkpoint copied every page")
        try await eventually("the WAL file emptied after the copy") { Self.walBytes(path) == 0 }
        #expect(try await store.query(Person.self).count == 25_000)
        await store.close()
        #expect(try Self.rowsInTheFile(path) == 25_000)
    }

    /// A download cut short (the network gone) ends its hold with the sync
    /// cycle: what it wrote is copied into the file in the pause after.
    @Test func aDownloadCutShortIsCheckpointedWhenTheCycleEnds() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let store = try Self.open(path)
        var version: Int64 = 0
        for page in 0..<4 { try await store.applyPull(Self.downloadPage(page, of: 10, &version), collections: ["people"]) }
        try await Task.sleep(for: .milliseconds(150))
        #expect(await store.idleCheckpoints?.completed == 0, "no checkpoint while pages are to come")
        try await store.finishInterruptedDownload()
        try await eventually("a checkpoint once the cut download ended") { await store.idleCheckpoints?.completed ?? 0 >= 1 }
        #expect(try Self.rowsInTheFile(path) == 10_000)
        #expect(try await store.pageCacheSize == -2_000, "the cache went back too")
        await store.close()
    }
}
