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
        // (4,000 pages), so the WAL holds at most that plus one write's pages.
        #expect(largest <= 4_010 * Self.frameBytes, "WAL reached \(largest) bytes")
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

    /// A first download writes pages of thousands of records back to back:
    /// no pause comes, and the copy runs beside the next page's writes.
    @Test func aDownloadsPagesAreCopiedIntoTheFileBesideTheWritesAndTheWALStaysBounded() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let store = try Self.open(path)
        let time = ServerTimestamp(rawValue: "2026-11-29T10:00:00.123456Z")
        let notes = String(repeating: "n", count: 400)
        var largest = 0
        var version: Int64 = 0
        for page in 0..<10 {
            let changes = (0..<2_500).map { _ -> PullChange in
                version += 1
                return .record(
                    WireRecord(
                        collection: "people", uuid: UUID(), id: version, version: version, updatedAt: time, deleted: false,
                        owner: "u-1", team: "t-1", data: ["name": .string("p\(version)"), "notes": .string(notes)]))
            }
            let raw = try RawPullPage(
                PullResponse(changes: changes, cursor: PullCursor(rawValue: "c\(page)"), hasMore: page < 9, serverTime: time))
            try await store.applyPull(raw, collections: ["people"])
            largest = max(largest, Self.walBytes(path))
        }
        try await eventually("a checkpoint ran beside the writes") { await store.idleCheckpoints?.besideWrites ?? 0 >= 1 }
        #expect(await store.idleCheckpoints?.failed == 0)
        // A page of 2,500 such records is about 300 WAL pages (bulk): the
        // WAL never passes the bulk backstop by more than one page's worth.
        #expect(largest <= Int(IdleCheckpointer.bulkBackstop + 400) * Self.frameBytes, "WAL reached \(largest) bytes")
        #expect(try await store.query(Person.self).count == 25_000)
        await store.close()
        #expect(try Self.rowsInTheFile(path) == 25_000)
    }
}
