import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostSimulation
import OutpostTesting
import Testing

/// A person record for the chaos tests (named apart from other test files' types).
struct ChaosPerson: SyncRecord, Equatable {
    static let collection = "people"
    var name: String
    var notes: String?
}

/// Real time for measuring latency, but timers never fire: no backoff retry
/// or reconnection sync starts a cycle behind the test's back, so every
/// cycle, and every report, is one the test asked for. (Each request still
/// ends at `requestTimeout`: URLSessionTransport's deadline uses real time.)
struct ChaosTestClock: MonotonicClock {
    private let origin = ContinuousClock.now

    func now() -> Duration { ContinuousClock.now - origin }

    func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: .seconds(86_400))
    }
}

/// One device: its store, its engine and who it belongs to.
struct ChaosDevice: Sendable {
    var name: String
    var store: LocalStore
    var engine: SyncEngine
    var principal: Principal

    func checked(_ ledger: WriteLedger) -> CheckedDevice {
        CheckedDevice(name: name, store: store, principal: principal, ledger: ledger)
    }
}

/// A live server (libmicrohttpd + SQLite) with the chaos proxy in front of it.
final class ChaosNetwork: Sendable {
    let directory: TemporaryDirectory
    let server: SyncServer
    let http: HTTPServer
    let proxy: ChaosProxy

    init() throws {
        directory = try TemporaryDirectory(prefix: "outpost-chaos")
        server = try SyncServer(
            database: try SQLiteServerDatabase(path: directory.path("server.sqlite")), config: ServerConfig())
        let server = self.server
        http = try HTTPServer(port: 0, threads: 4) { server.handle($0) }
        proxy = try ChaosProxy(upstreamPort: http.port)
    }

    func stop() {
        proxy.stop()
        http.stop()
    }

    /// A device that talks to the server through the proxy (or, `direct`, around it).
    func device(_ name: String, user: String = "u-1", timeout: TimeInterval = 2, direct: Bool = false) throws -> ChaosDevice {
        let store = try LocalStore(path: directory.path("\(name).sqlite"), collections: [ChaosPerson.descriptor])
        var options = SyncOptions()
        options.periodicInterval = nil
        options.requestTimeout = timeout
        let base = direct ? URL(string: "http://127.0.0.1:\(http.port)")! : proxy.url
        let engine = SyncEngine(
            store: store, transport: URLSessionTransport(baseURL: base),
            token: try server.tokens.issue(user: user, role: .field, team: "t-1", ttl: nil), options: options,
            clock: ChaosTestClock())
        return ChaosDevice(name: name, store: store, engine: engine, principal: Principal(user: user, role: .field, team: "t-1"))
    }

    /// Live people on the server: uuid → data.
    func serverPeople() throws -> [String: String] {
        let rows = try server.database.read { sql in
            try sql.query("SELECT uuid, data FROM records WHERE collection = 'people' AND deleted = 0", [])
        }
        var people: [String: String] = [:]
        for row in rows { people[row.string(0)] = row.string(1) }
        return people
    }

    /// Whether the server holds this record, deleted or not.
    func serverHasDeleted(_ uuid: UUID) throws -> Bool {
        try server.database.read { sql in
            try sql.query("SELECT deleted FROM records WHERE uuid = ?", [.text(uuid.wireText)])
        }.first?.bool(0) ?? false
    }

    /// Mutations that took effect on the server.
    func appliedMutations() throws -> Int {
        try server.database.read { sql in
            try sql.query("SELECT result FROM mutation_results", [])
        }.filter { $0.string(0).contains(#""status":"applied""#) }.count
    }

    /// Heals the network, syncs every device twice, and holds the result to the invariants.
    func healAndCheck(_ devices: [(ChaosDevice, WriteLedger)], sourceLocation: SourceLocation = #_sourceLocation) async throws {
        proxy.mode = .pass
        for _ in 0..<2 {
            for (device, _) in devices { try await device.engine.sync() }
        }
        let report = try await InvariantChecker.check(server: server, devices: devices.map { $0.0.checked($0.1) })
        #expect(report.violations == [], sourceLocation: sourceLocation)
        #expect((report.checks["I6"] ?? 0) == devices.count, sourceLocation: sourceLocation)
    }
}

/// Seconds since `start`.
private func seconds(since start: ContinuousClock.Instant) -> Double {
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

/// Field scenarios over a real socket: URLSession → chaos proxy → libmicrohttpd → SQLite.
///
/// The bound is a hang's, not a speed's: at a full run's start every suite
/// opens its databases at once, and on two cores the first test here has
/// waited 40 s and more for its turn (stack samples showed both of Swift's
/// threads in SQLite's file syncs), so it allows three minutes.
@Suite("Chaos proxy between a real client and a live server", .serialized, .timeLimit(.minutes(3)))
struct ChaosProxyTests {
    @Test func passThroughSyncsBothWays() async throws {
        let network = try ChaosNetwork()
        defer { network.stop() }
        // Nothing here times out on purpose: a loaded machine must not make it
        // (at a full run's start, with every suite opening its servers, one
        // answer here has taken more than 15 s).
        let phone = try network.device("phone", timeout: 40)
        let tablet = try network.device("tablet", timeout: 40)
        try await waitUntilServing(network.proxy.url)
        var ledger = WriteLedger()
        let id = try await phone.store.create(ChaosPerson(name: "Ana"))
        ledger.recordCreate(id)

        let sent = try await phone.engine.sync()
        #expect(sent.confirmed == 1)
        let received = try await tablet.engine.sync()
        #expect(received.received >= 1)
        #expect(try await tablet.store.get(ChaosPerson.self, id)?.value.name == "Ana")
        #expect(await tablet.engine.currentStatus.connectivity == .online)

        let proxy = network.proxy
        #expect(proxy.connectionsAccepted >= 1)
        #expect(proxy.bytesToServer > 0 && proxy.bytesToServer == proxy.bytesFromClients)
        #expect(proxy.bytesToClients > 0 && proxy.bytesToClients == proxy.bytesFromServer)
        #expect(proxy.resetsSent == 0)
        try await network.healAndCheck([(phone, ledger), (tablet, WriteLedger())])
    }

    @Test func highLatencyStillSyncs() async throws {
        let network = try ChaosNetwork()
        defer { network.stop() }
        let phone = try network.device("phone", timeout: 5)
        let tablet = try network.device("tablet", timeout: 5)
        var ledger = WriteLedger()
        for index in 0..<3 { ledger.recordCreate(try await phone.store.create(ChaosPerson(name: "Person \(index)"))) }

        network.proxy.mode = .latency(.milliseconds(250))
        let start = ContinuousClock.now
        let sent = try await phone.engine.sync()
        // At least one request and its answer, each held 250 ms.
        #expect(seconds(since: start) >= 0.5)
        #expect(sent.confirmed == 3)
        let received = try await tablet.engine.sync()
        #expect(received.received >= 3)
        // 250 ms is below the connectivity model's slow threshold (3 s): online,
        // though a slower link may legitimately read as degraded.
        #expect([.online, .degraded].contains(await tablet.engine.currentStatus.connectivity))
        try await network.healAndCheck([(phone, ledger), (tablet, WriteLedger())])
    }

    @Test func aSlowDripOfALargePullTimesOutCleanlyThenCompletes() async throws {
        let network = try ChaosNetwork()
        defer { network.stop() }
        // The office writes 300 records around the proxy.
        let office = try network.device("office", timeout: 10, direct: true)
        var officeLedger = WriteLedger()
        let notes = String(repeating: "a long note about the household visit ", count: 4)
        for index in 0..<300 {
            officeLedger.recordCreate(try await office.store.create(ChaosPerson(name: "Person \(index)", notes: notes)))
        }
        #expect(try await office.engine.sync().confirmed == 300)

        // The field phone downloads them through a trickle, with a capture of its own waiting.
        let phone = try network.device("phone", timeout: 2)
        var phoneLedger = WriteLedger()
        let capture = try await phone.store.create(ChaosPerson(name: "Captured in the field"))
        phoneLedger.recordCreate(capture)
        network.proxy.mode = .slowDrip(bytesPerSecond: 5_000)
        let start = ContinuousClock.now
        await #expect(throws: SyncFailure.noAnswer) { try await phone.engine.sync() }
        #expect(seconds(since: start) < 8)
        // The push went through the trickle (its answer is small); the big
        // page did not, and nothing of it was half-applied.
        #expect(try await phone.store.get(ChaosPerson.self, capture) != nil)
        #expect(try network.serverPeople().count == 301)
        let partial = try await phone.store.query(RecordQuery("people")).count
        #expect(partial == 1, "a page is applied whole or not at all")

        // A faster trickle: the same download completes within the timeout.
        network.proxy.mode = .slowDrip(bytesPerSecond: 200_000)
        let before = network.proxy.bytesToClients
        let report = try await phone.engine.sync()
        #expect(report.received >= 300)
        // Compressed: 300 records with notes are about 12 kB on the wire.
        #expect(network.proxy.bytesToClients - before > 8_000)
        #expect(try await phone.store.query(RecordQuery("people")).count == 301)
        #expect(try network.serverPeople().count == 301)
        try await network.healAndCheck([(office, officeLedger), (phone, phoneLedger)])
    }

    @Test func aBlackholeIsNoAnswerAndTheCaptureIsKept() async throws {
        let network = try ChaosNetwork()
        defer { network.stop() }
        let phone = try network.device("phone")
        var ledger = WriteLedger()
        let id = try await phone.store.create(ChaosPerson(name: "Ana"))
        ledger.recordCreate(id)

        network.proxy.mode = .blackhole
        let start = ContinuousClock.now
        await #expect(throws: SyncFailure.noAnswer) { try await phone.engine.sync() }
        let elapsed = seconds(since: start)
        #expect(elapsed >= 1.5 && elapsed < 5, "ends at the 2 s request timeout, took \(elapsed) s")
        #expect(network.proxy.bytesFromClients > 0, "the request went into the hole")
        #expect(network.proxy.bytesToServer == 0)
        #expect(try network.serverPeople().isEmpty)
        #expect(try await phone.store.get(ChaosPerson.self, id)?.syncState == .pending)
        #expect(try await phone.store.outboxSummary().awaitingConfirmation == 1, "sent, outcome unknown")

        network.proxy.mode = .pass
        let report = try await phone.engine.sync()
        #expect(report.confirmed == 1)
        #expect(report.duplicates == 0, "the server never saw the first attempt")
        #expect(try network.serverPeople().count == 1)
        try await network.healAndCheck([(phone, ledger)])
    }

    @Test func insertConfirmedButResponseLostResolvesAsADuplicate() async throws {
        let network = try ChaosNetwork()
        defer { network.stop() }
        let phone = try network.device("phone")
        let tablet = try network.device("tablet")
        var ledger = WriteLedger()
        let id = try await phone.store.create(ChaosPerson(name: "Ana"))
        ledger.recordCreate(id)

        network.proxy.mode = .resetAfterRequest
        await #expect(throws: SyncFailure.noAnswer) { try await phone.engine.sync() }
        #expect(network.proxy.resetsSent >= 1)
        // The server applied it; the phone does not know.
        #expect(try network.serverPeople().keys.sorted() == [id.wireText])
        #expect(try await phone.store.get(ChaosPerson.self, id)?.syncState == .pending)
        #expect(try await phone.store.outboxSummary().awaitingConfirmation == 1)

        network.proxy.mode = .pass
        let report = try await phone.engine.sync()
        #expect(report.duplicates == 1)
        #expect(report.confirmed == 1)
        #expect(try await phone.store.get(ChaosPerson.self, id)?.syncState == .synced)
        #expect(try network.serverPeople().count == 1)
        #expect(try network.appliedMutations() == 1)
        #expect(try await tablet.engine.sync().received >= 1)
        #expect(try await tablet.store.query(RecordQuery("people")).count == 1)
        try await network.healAndCheck([(phone, ledger), (tablet, WriteLedger())])
    }

    @Test func aSocketOpenButDeadIsNoAnswer() async throws {
        let network = try ChaosNetwork()
        defer { network.stop() }
        let phone = try network.device("phone")
        var ledger = WriteLedger()
        let id = try await phone.store.create(ChaosPerson(name: "Ana"))
        ledger.recordCreate(id)
        try await phone.engine.sync()

        // An edit while the connection (kept alive from the last sync) goes dead.
        try await phone.store.update(ChaosPerson.self, id) { $0.notes = "mark-silent-1" }
        ledger.recordUpdate(id, mark: "mark-silent-1")
        network.proxy.mode = .silentOpen
        let start = ContinuousClock.now
        await #expect(throws: SyncFailure.noAnswer) { try await phone.engine.sync() }
        #expect(seconds(since: start) < 5)
        #expect(try network.serverPeople()[id.wireText]?.contains("mark-silent-1") == false)
        #expect(try await phone.store.get(ChaosPerson.self, id)?.value.notes == "mark-silent-1")
        #expect(try await phone.store.outboxSummary().total == 1)

        try await network.healAndCheck([(phone, ledger)])
        #expect(try network.serverPeople()[id.wireText]?.contains("mark-silent-1") == true)
    }

    @Test func aRefusingServerLosesNothing() async throws {
        let network = try ChaosNetwork()
        defer { network.stop() }
        let phone = try network.device("phone")
        let tablet = try network.device("tablet")
        var ledger = WriteLedger()
        let kept = try await phone.store.create(ChaosPerson(name: "Kept"))
        let removed = try await phone.store.create(ChaosPerson(name: "Removed"))
        ledger.recordCreate(kept)
        ledger.recordCreate(removed)
        try await phone.engine.sync()
        try await tablet.engine.sync()
        #expect(try await tablet.store.get(ChaosPerson.self, removed) != nil)

        // Offline-ish: a new capture and a delete while the server refuses connections.
        try await phone.store.delete(ChaosPerson.self, removed)
        ledger.recordDelete(removed)
        let added = try await phone.store.create(ChaosPerson(name: "Added while refused"))
        ledger.recordCreate(added)
        network.proxy.mode = .refuse
        do {
            try await phone.engine.sync()
            Issue.record("a sync through a refusing server succeeded")
        } catch let failure as SyncFailure {
            #expect(failure == .offline || failure == .noAnswer, "\(failure)")
        }
        #expect(network.proxy.resetsSent >= 1)
        #expect(try await phone.store.get(ChaosPerson.self, added)?.syncState == .pending)
        #expect(try await phone.store.get(ChaosPerson.self, removed) == nil)
        #expect(try await phone.store.outboxSummary().total == 2)
        #expect(try network.serverPeople().count == 2, "nothing reached the server")

        try await network.healAndCheck([(phone, ledger), (tablet, WriteLedger())])
        #expect(try network.serverPeople().keys.sorted() == [added.wireText, kept.wireText].sorted())
        #expect(try network.serverHasDeleted(removed))
        #expect(try await tablet.store.get(ChaosPerson.self, removed) == nil)
        #expect(try await tablet.store.get(ChaosPerson.self, added) != nil)
    }

    @Test func stopEndsHeldConnectionsPromptly() async throws {
        let network = try ChaosNetwork()
        defer { network.stop() }
        let phone = try network.device("phone", timeout: 5)
        try await phone.store.create(ChaosPerson(name: "Ana"))
        network.proxy.mode = .silentOpen
        let sync = Task { try await phone.engine.sync() }
        let deadline = ContinuousClock.now + .seconds(3)
        while network.proxy.openConnections == 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(network.proxy.openConnections >= 1, "the dead socket is held open")
        let start = ContinuousClock.now
        network.proxy.stop()
        #expect(seconds(since: start) < 1, "stop() closes held connections and joins every thread")
        #expect(network.proxy.openConnections == 0)
        network.proxy.stop()  // idempotent
        // The client saw its connection end before the 5 s timeout.
        await #expect(throws: SyncFailure.noAnswer) { try await sync.value }
        #expect(seconds(since: start) < 4)
        // Nothing listens any more: the request cannot even be sent.
        await #expect(throws: SyncFailure.offline) { try await phone.engine.sync() }
    }
}
