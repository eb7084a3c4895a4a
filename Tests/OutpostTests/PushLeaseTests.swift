import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostSimulation
import OutpostSQLite
import OutpostTesting
import Testing

/// The in-flight batch is a lease that ends on every path: success, a
/// settlement or release that throws, a cancelled request, an abandoned
/// cycle. A lease left behind stops the queue ("sent 0" for ever).
///
/// SQLite waits for a lock by sleeping its thread, one of the few Swift
/// concurrency shares between all tests: the lock test waits 200 ms, not
/// the store's usual 5 s, and the other paths fail through a faulty disk.
@Suite("Push lease", .serialized, .timeLimit(.minutes(5)))
struct PushLeaseTests {
    /// A device whose store waits only briefly for locks and writes through a faulty disk.
    static func device(_ harness: SyncHarness, disk: FaultyDisk) throws -> (store: LocalStore, engine: SyncEngine, network: FaultInjectingTransport) {
        let store = try LocalStore(
            path: harness.directory.path("phone.sqlite"), collections: [Person.descriptor, Visit.descriptor], vfs: disk.name,
            lockWait: .milliseconds(200))
        let network = FaultInjectingTransport(wrapping: InProcessTransport(server: harness.server), clock: harness.clock)
        var options = SyncOptions()
        options.periodicInterval = nil
        options.reconnectJitter = .zero
        let engine = SyncEngine(
            store: store, transport: network, token: try harness.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil),
            options: options, clock: harness.clock)
        return (store, engine, network)
    }

    /// Another connection holding the device's write lock longer than the
    /// store waits for it (an app extension, a backup tool): the store's
    /// next write fails with "database is locked".
    final class WriteLockHolder: @unchecked Sendable {
        // @unchecked Sendable: used from one test task at a time.
        let connection: SQLiteConnection
        init(_ path: String) throws {
            connection = try SQLiteConnection(path: path)
            _ = try connection.run("BEGIN IMMEDIATE")
        }
        func release() throws { _ = try connection.run("COMMIT") }
    }

    @Test func aSettlementThatThrowsEndsTheLeaseAndTheNextSyncConfirms() async throws {
        let harness = try SyncHarness()
        let device = try Self.device(harness, disk: FaultyDisk())
        let id = try await device.store.create(Person(name: "Ana"))
        let gate = FaultInjectingTransport.Gate()
        device.network.inject(.hold(gate)) { $0.target.hasPrefix("/v1/push") }
        let sync = Task { try await device.engine.sync() }
        try await gate.waitForArrivals()
        // Another connection holds the write lock when the answer arrives.
        let lock = try WriteLockHolder(device.store.path)
        gate.open()
        await #expect(throws: SyncFailure.self) { try await sync.value(within: .seconds(60), "the locked settlement failed") }
        #expect(await device.store.inFlightBatch == nil, "the lease ended")
        try lock.release()
        let report = try await device.engine.sync()
        #expect(report.sent == 1 && report.duplicates == 1, "resent with its seq, answered from the stored result")
        #expect(try await device.store.get(Person.self, id)?.syncState == .synced)
        #expect(try harness.serverRecords().count == 1)
    }

    @Test func aLocalFailureIsReportedAsLocalNotAsTheServers() async throws {
        let harness = try SyncHarness()
        let disk = FaultyDisk()
        let device = try Self.device(harness, disk: disk)
        try await device.store.create(Person(name: "Ana"))
        let gate = FaultInjectingTransport.Gate()
        device.network.inject(.hold(gate)) { $0.target.hasPrefix("/v1/push") }
        let sync = Task { try await device.engine.sync() }
        try await gate.waitForArrivals()
        disk.fail(.writes)
        gate.open()
        do {
            _ = try await sync.value(within: .seconds(60), "the settlement on a full disk failed")
            Issue.record("the sync should have failed")
        } catch let failure as SyncFailure {
            guard case .localStorage(let detail) = failure else {
                Issue.record("expected a local storage failure, got \(failure)")
                return
            }
            #expect(detail.contains("full"), "\(detail)")
        }
        disk.heal()
        try await device.engine.sync()
        #expect(try harness.serverRecords().count == 1)
    }

    @Test func aReleaseThatThrowsEndsTheLeaseToo() async throws {
        let harness = try SyncHarness()
        let disk = FaultyDisk()
        let device = try Self.device(harness, disk: disk)
        try await device.store.create(Person(name: "Ana"))
        // The push is answered 503 while the disk is full: the release that
        // records the attempt fails.
        let gate = FaultInjectingTransport.Gate()
        device.network.inject(.status(503, retryAfter: 1, heldBy: gate)) { $0.target.hasPrefix("/v1/push") }
        let failing = Task { try await device.engine.sync() }
        try await gate.waitForArrivals()
        disk.fail(.writes)
        gate.open()
        await #expect(throws: SyncFailure.self) { try await failing.value(within: .seconds(60), "the 503 on a full disk failed") }
        // The answer may count as the server coming back, which starts a
        // cycle of its own: the lease is checked once that one ended too.
        await device.engine.waitForIdle()
        #expect(await device.store.inFlightBatch == nil)
        #expect(disk.injected > 0, "the release did meet the full disk")
        disk.heal()
        try await device.engine.sync()
        #expect(try harness.serverRecords().count == 1)
        #expect(try await device.store.outboxEntries().isEmpty)
    }

    @Test func aCancelledRequestEndsTheLease() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        try await device.store.create(Person(name: "Ana"))
        device.network.inject(.fail(CancellationError())) { $0.target.hasPrefix("/v1/push") }
        _ = try? await device.engine.sync()
        #expect(await device.store.inFlightBatch == nil)
        let report = try await device.engine.sync()
        #expect(report.confirmed == 1)
        #expect(try harness.serverRecords().count == 1)
    }

    @Test func anAbandonedCycleEndsItsLeaseAndTheChangeIsSentOnce() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        try await device.store.create(Person(name: "Ana"))
        let gate = FaultInjectingTransport.Gate()
        device.network.inject(.hold(gate)) { $0.target.hasPrefix("/v1/push") }
        let stale = Task { try await device.engine.sync() }
        try await gate.waitForArrivals()
        // A reconnection abandons the cycle while its push is out.
        await device.engine.receive(PathHint(isConnected: false))
        await device.engine.receive(PathHint(isConnected: true))
        gate.open()
        _ = try? await stale.value(within: .seconds(30), "the abandoned cycle ended")
        await device.engine.waitForIdle()
        #expect(await device.store.inFlightBatch == nil)
        try await device.engine.sync()
        #expect(try harness.serverRecords().count == 1)
        #expect(try await device.store.outboxEntries().isEmpty)
    }

    @Test func aSuccessfulPushEndsItsLease() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        try await device.store.create(Person(name: "Ana"))
        try await device.engine.sync()
        #expect(await device.store.inFlightBatch == nil)
        #expect(try await device.store.outboxEntries().isEmpty)
    }
}
