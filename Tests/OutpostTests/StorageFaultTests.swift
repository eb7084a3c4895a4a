import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostSimulation
import OutpostSQLite
import OutpostTesting
import Testing

/// The device's own storage failing: a full disk, I/O errors at any step of
/// a transaction, a damaged row, a database truncated to nothing. Reading
/// goes on, nothing committed is lost, nothing is made up, and the failure
/// is said as local, never as the server's.
@Suite("Local storage faults", .timeLimit(.minutes(5)))
struct StorageFaultTests {
    static func open(_ path: String, _ disk: FaultyDisk?, ids seed: UInt64 = 1) throws -> LocalStore {
        try LocalStore(
            path: path, collections: StoreFixture.collections, ids: UUIDv7Generator.seeded(seed, clock: SystemWallClock()),
            vfs: disk?.name)
    }

    @Test func aFullDiskStillOpensAndReadsEverything() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let disk = FaultyDisk()
        let store = try Self.open(path, disk)
        for index in 0..<30 { try await store.create(Person(name: "p\(index)")) }
        await store.close()

        disk.fail(.writes)  // every write from now on: the disk is full
        let full = try Self.open(path, disk, ids: 2)
        #expect(try await full.query(Person.self).count == 30, "opening wrote nothing, reading works")
        #expect(try await full.outboxSummary().pending == 30)
        await #expect(throws: StoreError.diskFull) { try await full.create(Person(name: "p30")) }
        #expect(try await full.query(Person.self).count == 30, "the failed write changed nothing")
        disk.heal()
        try await full.create(Person(name: "p30"))
        #expect(try await full.query(Person.self).count == 31)
        #expect(try await full.integrityProblems().isEmpty)
    }

    /// A write failing at EVERY step of a create, one step per round: each
    /// attempt either commits whole or changes nothing. (With WAL and
    /// synchronous=NORMAL a commit makes no fsync; syncs fail in checkpoints,
    /// which the simulation injects.)
    @Test func aFaultAtAnyStepOfATransactionLosesNothingCommitted() async throws {
        let operations = FaultyDisk.Operations.writes
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let disk = FaultyDisk()
        var store = try Self.open(path, disk)
        try await store.create(Person(name: "before"))
        // How many such operations one create makes.
        disk.fail(operations, after: Int.max)
        try await store.create(Person(name: "counting"))
        let steps = disk.operations
        disk.heal()
        #expect(steps > 0)
        var committed = 2
        for step in 0..<steps {
            disk.fail(operations, after: step, sticky: false)
            do {
                try await store.create(Person(name: "step \(step)"))
                committed += 1
            } catch let error as StoreError {
                #expect([StoreError.diskFull].contains(error) || { if case .ioFailure = error { return true } else { return false } }(), "\(error)")
            }
            disk.heal()
            // A process that failed to write may be killed next: reopen and check.
            await store.close()
            store = try Self.open(path, disk, ids: UInt64(10 + step))
            #expect(try await store.query(Person.self).count == committed, "step \(step): every commit kept, no half write")
            #expect(try await store.integrityProblems().isEmpty, "step \(step)")
        }
        #expect(disk.injected == steps)
    }

    @Test func aSyncOnAFullDiskIsReportedAsLocalAndRecovers() async throws {
        let harness = try SyncHarness()
        let disk = FaultyDisk()
        let path = harness.directory.path("phone.sqlite")
        let store = try Self.open(path, disk)
        try await store.create(Person(name: "Ana"))
        let token = try harness.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)
        var options = SyncOptions()
        options.periodicInterval = nil
        let engine = SyncEngine(
            store: store, transport: InProcessTransport(server: harness.server), token: token, options: options,
            clock: harness.clock)
        disk.fail(.writes)
        do {
            try await engine.sync()
            Issue.record("the sync should fail")
        } catch let failure as SyncFailure {
            guard case .localStorage = failure else {
                Issue.record("a full disk is a local failure, not \(failure)")
                return
            }
        }
        #expect(await store.inFlightBatch == nil)
        disk.heal()
        try await engine.sync()
        #expect(try harness.serverRecords().count == 1)
        #expect(try await store.outboxEntries().isEmpty)
    }

    @Test func aDatabaseTruncatedToNothingIsReportedNotSilentlyReplaced() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let store = try Self.open(path, nil)
        for index in 0..<20 { try await store.create(Person(name: "unsent \(index)")) }
        let clientID = store.clientID
        await store.close()
        try Data().write(to: URL(fileURLWithPath: path))
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }

        #expect(throws: StoreError.databaseLost(path: path, clientID: clientID)) { try Self.open(path, nil) }
        #expect(
            StoreError.databaseLost(path: path, clientID: clientID).description.contains("unsent changes are gone"),
            "said plainly")
        let fresh = try LocalStore(path: path, collections: StoreFixture.collections, ifDatabaseLost: .startOver)
        #expect(fresh.clientID != clientID, "a new client: the old one's seqs are never handed out again")
        #expect(try await fresh.query(Person.self).isEmpty)
        await fresh.close()
        // Once started over, the new store opens normally.
        _ = try Self.open(path, nil)
    }

    /// Cut short, and two kinds a walk that only matches brackets would pass
    /// (a queued change's data is checked as it is read, then sent as text).
    @Test(arguments: [#"{"name": "dam"#, #"{"name": "\q"}"#, #"{"name": tru}"#])
    func aDamagedQueuedChangeIsRebuiltFromItsRecordAndNeverSentForARandomOne(damage: String) async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        try await device.store.create(Person(name: "good 1"))
        let damaged = try await device.store.create(Person(name: "damaged"))
        try await device.store.create(Person(name: "good 2"))
        // Another program (or a bad sector) breaks one queued change's JSON.
        let raw = try SQLiteConnection(path: device.store.path)
        _ = try raw.run("UPDATE outbox SET data = ? WHERE record_uuid = ?", [.text(damage), .text(damaged.wireText)])
        raw.close()

        #expect(try await device.store.query(Person.self).count == 3, "listing still works")
        // An edit meanwhile cannot merge into the unreadable entry.
        try await device.store.update(Person.self, damaged) { $0.phone = "555" }
        let report = try await device.engine.sync()
        #expect(report.failure == nil)
        let onServer = try harness.serverRecords()
        #expect(onServer.count == 3, "the damaged change is queued again from the record's own row")
        let rebuilt = try #require(onServer.first { $0.uuid == damaged.wireText })
        #expect(rebuilt.data?.contains("damaged") == true && rebuilt.data?.contains("555") == true, "\(rebuilt)")
        #expect(try await device.store.get(Person.self, damaged)?.syncState == .synced)
        #expect(await device.store.damagedRows().isEmpty, "repaired, nothing left to report")
        #expect(try await device.store.outboxEntries().isEmpty)
        #expect(try await device.store.conflicts().isEmpty, "no spurious conflict")
    }

    @Test func aDamagedRecordRowIsATypedErrorForThatRowOnly() async throws {
        let fixture = try StoreFixture()
        let good = try await fixture.store.create(Person(name: "good"))
        let bad = try await fixture.store.create(Person(name: "bad"))
        let raw = try SQLiteConnection(path: fixture.path)
        _ = try raw.run("UPDATE people SET rejection_json = '{\"code\": 12' WHERE uuid = ?", [.text(bad.wireText)])
        raw.close()
        let list = try await fixture.store.query(Person.self)
        #expect(list.map(\.uuid) == [good], "the list shows what can be read")
        #expect(await fixture.store.damagedRows().count == 1)
        await #expect(throws: StoreError.self) { try await fixture.store.get(Person.self, bad) }
        do {
            _ = try await fixture.store.get(Person.self, bad)
        } catch let StoreError.damagedRow(table, key, problem) {
            #expect(table == "people" && key == bad.wireText && problem.contains("rejection"), "\(problem)")
        }
    }
}
