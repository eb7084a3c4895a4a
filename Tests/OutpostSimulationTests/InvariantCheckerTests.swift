import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostSimulation
import OutpostTesting
import Testing

/// The checker must catch what it claims to catch: each test breaks one invariant on purpose.
@Suite("Invariant checker", .timeLimit(.minutes(10)))
struct InvariantCheckerTests {
    struct Person: SyncRecord {
        static let collection = "people"
        var name: String
        var notes: String?
    }

    /// A server and one device; the folder lives as long as the fixture.
    final class Fixture: Sendable {
        let directory: TemporaryDirectory
        let server: SyncServer
        let store: LocalStore
        let engine: SyncEngine

        init() throws {
            directory = try TemporaryDirectory()
            server = try SyncServer(
                database: try SQLiteServerDatabase(path: directory.path("server.sqlite")), config: ServerConfig())
            store = try LocalStore(path: directory.path("device.sqlite"), collections: [Person.descriptor])
            var options = SyncOptions()
            options.periodicInterval = nil
            engine = SyncEngine(
                store: store, transport: ServerTransport(server: server),
                token: try server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil), options: options)
        }
    }

    @Test func aCleanRunHasNoViolations() async throws {
        let fixture = try Fixture()
        let (server, store, engine) = (fixture.server, fixture.store, fixture.engine)
        var ledger = WriteLedger()
        let id = try await store.create(Person(name: "Ana"))
        ledger.recordCreate(id)
        try await store.update(Person.self, id) { $0.notes = "mark-1" }
        ledger.recordUpdate(id, mark: "mark-1")
        try await engine.sync()
        try await engine.sync()
        let device = CheckedDevice(name: "d", store: store, principal: Principal(user: "u-1", role: .field, team: "t-1"), ledger: ledger)
        let report = try await InvariantChecker.check(server: server, devices: [device])
        #expect(report.violations == [])
        #expect((report.checks["I1"] ?? 0) > 0)
    }

    /// The server's feed went back (a power loss took its last commits, or
    /// a backup came back) while the device holds a cursor past its end.
    @Test func aCursorPastTheServersFeedIsI10() async throws {
        let fixture = try Fixture()
        let (server, store, engine) = (fixture.server, fixture.store, fixture.engine)
        var ledger = WriteLedger()
        for name in ["Ana", "Bea", "Cy"] { ledger.recordCreate(try await store.create(Person(name: name))) }
        try await engine.sync()
        let device = CheckedDevice(name: "d", store: store, principal: Principal(user: "u-1", role: .field, team: "t-1"), ledger: ledger)
        #expect(try await InvariantChecker.check(server: server, devices: [device]).violations == [])
        _ = try server.database.write { sql in
            try sql.execute("UPDATE server_state SET value = CAST(CAST(value AS INTEGER) - 2 AS TEXT) WHERE key = 'version'", [])
        }
        let report = try await InvariantChecker.check(server: server, devices: [device])
        #expect(report.violations.map(\.invariant).contains("I10"))
    }

    @Test func anUnsentWriteIsALostWriteAndAStuckQueue() async throws {
        let fixture = try Fixture()
        let (server, store) = (fixture.server, fixture.store)
        var ledger = WriteLedger()
        ledger.recordCreate(try await store.create(Person(name: "Never sent")))
        let device = CheckedDevice(name: "d", store: store, principal: Principal(user: "u-1", role: .field, team: "t-1"), ledger: ledger)
        let report = try await InvariantChecker.check(server: server, devices: [device])
        #expect(Set(report.violations.map(\.invariant)) == ["I1", "I6", "I8"])
    }

    /// I8 on its own: a record left waiting after healing, though the
    /// ledger has nothing to say about it (a device that stopped).
    @Test func aRecordStillWaitingAfterHealingIsAStoppedDevice() async throws {
        let fixture = try Fixture()
        let (server, store, engine) = (fixture.server, fixture.store, fixture.engine)
        let id = try await store.create(Person(name: "Ana"))
        try await engine.sync()
        try await store.update(Person.self, id) { $0.name = "Ana Maria" }  // never synced
        var ledger = WriteLedger()
        ledger.recordCreate(id)
        let device = CheckedDevice(name: "d", store: store, principal: Principal(user: "u-1", role: .field, team: "t-1"), ledger: ledger)
        let report = try await InvariantChecker.check(server: server, devices: [device])
        #expect(report.violations.map(\.invariant).contains("I8"))
        #expect(report.violations.contains { $0.invariant == "I8" && $0.detail.contains("pending") })
    }

    @Test func aDeletedRecordLiveOnTheServerIsAResurrection() async throws {
        let fixture = try Fixture()
        let (server, store, engine) = (fixture.server, fixture.store, fixture.engine)
        var ledger = WriteLedger()
        let id = try await store.create(Person(name: "Ana"))
        try await engine.sync()
        ledger.recordCreate(id)
        ledger.recordDelete(id)  // claimed, never done
        let device = CheckedDevice(name: "d", store: store, principal: Principal(user: "u-1", role: .field, team: "t-1"), ledger: ledger)
        let report = try await InvariantChecker.check(server: server, devices: [device])
        #expect(report.violations.map(\.invariant).contains("I3"))
    }

    @Test func anEditThatVanishedIsASilentLostUpdate() async throws {
        let fixture = try Fixture()
        let (server, store, engine) = (fixture.server, fixture.store, fixture.engine)
        var ledger = WriteLedger()
        let id = try await store.create(Person(name: "Ana"))
        ledger.recordCreate(id)
        try await engine.sync()
        ledger.recordUpdate(id, mark: "mark-never-applied")
        let device = CheckedDevice(name: "d", store: store, principal: Principal(user: "u-1", role: .field, team: "t-1"), ledger: ledger)
        let report = try await InvariantChecker.check(server: server, devices: [device])
        #expect(report.violations.map(\.invariant) == ["I4"])
    }

    @Test func aRecordOutsideTheScopeIsALeak() async throws {
        let fixture = try Fixture()
        let (server, store, engine) = (fixture.server, fixture.store, fixture.engine)
        let id = try await store.create(Person(name: "Ana"))
        try await engine.sync()
        // Checked as if the device belonged to someone else.
        var ledger = WriteLedger()
        ledger.recordCreate(id)
        let device = CheckedDevice(name: "d", store: store, principal: Principal(user: "u-2", role: .field, team: "t-2"), ledger: ledger)
        let report = try await InvariantChecker.check(server: server, devices: [device])
        #expect(report.violations.map(\.invariant).contains("I7"))
    }
}
