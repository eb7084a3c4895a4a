import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostSimulation
import OutpostTesting

/// `outpost demo`: a scripted day in the field through a flaky network,
/// narrated, ending with the invariants checked. The README's first command.
enum DemoCommand {
    static let help = """
        Usage: outpost demo [--quiet] [--console]

        Starts a sync server on SQLite in a temporary folder and several devices (field
        workers, a coordinator, an administrator) and plays a day in the field through a
        network that lies: captures made offline (a photo among them, opened by the
        coordinator), a lost answer, a slow network, two people
        editing one record, a delete while its create is in flight, a parent and children
        created offline, and twenty devices reconnecting at once. It ends with a table of
        what was written and what the server holds, and checks invariants I1-I10.
        Takes well under a minute; leaves nothing behind.

          --console  afterwards keep the server running and print an administrator's
                     token: open the console at the printed /admin address to see the
                     day's records, their history, the devices and what was refused.
                     Ctrl-C stops it and removes the folder.
        """

    /// A person's phone in the demo.
    final class Device: @unchecked Sendable {
        // @unchecked Sendable: the demo drives every device from one task.
        let name: String
        let principal: Principal
        let store: LocalStore
        let engine: SyncEngine
        let network: FaultInjectingTransport
        var ledger = WriteLedger()

        init(name: String, principal: Principal, store: LocalStore, engine: SyncEngine, network: FaultInjectingTransport) {
            self.name = name
            self.principal = principal
            self.store = store
            self.engine = engine
            self.network = network
        }

        func create(_ collection: String, _ data: JSONObject) async throws -> UUID {
            let uuid = try await store.create(in: collection, data)
            ledger.recordCreate(uuid)
            return uuid
        }

        func edit(_ collection: String, _ uuid: UUID, notes: String) async throws {
            try await store.update(in: collection, uuid, patch: ["notes": .string(notes)])
            ledger.recordUpdate(uuid, mark: notes)
        }

        func delete(_ collection: String, _ uuid: UUID) async throws {
            try await store.delete(in: collection, uuid)
            ledger.recordDelete(uuid)
        }

        var checked: CheckedDevice { CheckedDevice(name: name, store: store, principal: principal, ledger: ledger) }
    }

    /// Bytes standing for a phone's JPEG: a JPEG's first and last markers around seeded noise.
    static func photo(bytes count: Int) -> Data {
        var random = SeededRandom(seed: 2026)
        return Data([0xFF, 0xD8, 0xFF, 0xE0] + random.bytes(count - 6) + [0xFF, 0xD9])
    }

    static func run(_ words: [String]) async throws {
        var arguments = try Arguments(words, flagNames: ["quiet", "console"])
        let quiet = arguments.flag("quiet")
        let console = arguments.flag("console")
        try arguments.checkAllUsed()
        guard arguments.positional.isEmpty else { throw UsageError("demo takes no words, only options.") }
        let narrator = Narrator(quiet: quiet)
        let started = Date()

        let directory = try TemporaryDirectory(prefix: "outpost-demo")
        let database = try SQLiteServerDatabase(path: directory.path("server.sqlite"))
        let server = try SyncServer(database: database, config: ServerConfig())
        let http = try HTTPServer(port: 0, threads: 4, server: server)
        defer {
            http.stop()
            database.close()
        }
        let base = URL(string: "http://127.0.0.1:\(http.port)")!
        narrator.heading("Morning")
        narrator.say("A sync server starts on SQLite at \(base.absoluteString) (a temporary folder, no set-up).")

        func device(_ name: String, _ user: String, _ role: Role, _ team: String, jitter: Duration = .zero) throws -> Device {
            let store = try LocalStore(
                path: directory.path("\(user)-\(name).sqlite"),
                collections: [
                    CollectionDescriptor(name: "people", indexedFields: ["name"]),
                    CollectionDescriptor(name: "visits", references: ["person": "people"]),
                ])
            let network = FaultInjectingTransport(wrapping: HTTPTransport.make(baseURL: base))
            var options = SyncOptions()
            options.periodicInterval = nil
            options.requestTimeout = 5
            options.reconnectJitter = jitter
            let token = try server.tokens.issue(user: user, role: role, team: team, ttl: nil)
            let engine = SyncEngine(store: store, transport: network, token: token, options: options)
            return Device(
                name: name, principal: Principal(user: user, role: role, team: team), store: store, engine: engine,
                network: network)
        }
        let ana = try device("Ana", "ana", .field, "north")
        let bruno = try device("Bruno", "bruno", .field, "north")
        let carla = try device("Carla", "carla", .coordinator, "north")
        let dora = try device("Dora", "dora", .admin, "hq")
        let team = [ana, bruno, carla, dora]
        for person in team {
            let report = try await person.engine.sync()
            let mode = try await person.store.metadata("scope.mode").flatMap(ScopeMode.init(rawValue:)) ?? .full
            let window = try await person.store.metadata("scope.window_start")
            let described: String
            switch mode {
            case .full: described = "keeps everything offline"
            case .capped: described = window == nil ? "keeps the team's data offline (under the 5,000-row cap)" : "keeps the last 12 months offline"
            case .onlineWithCache: described = "searches online and caches what she opens"
            }
            narrator.say("\(person.name) (\(person.principal.role.rawValue)) signs in and \(described): \(report.received) catalog entries downloaded.")
        }

        narrator.heading("A street with no signal")
        ana.network.isOffline = true
        var families: [UUID] = []
        var doorVisit: UUID?
        let doorPhoto = Self.photo(bytes: 320_000)
        for (name, phone) in [("Lucía Romero", "555-0101"), ("Marco Bianchi", "555-0102"), ("Olga Petrova", "555-0103")] {
            let person = try await ana.create("people", ["name": .string(name), "phone": .string(phone), "section": 4])
            var visit: JSONObject = ["person": .string(person.wireText), "visited_at": .string(ServerTimestamp(Date()).rawValue), "notes": "first visit"]
            if families.isEmpty {
                // She photographs Lucía's house front at the door.
                visit["photo"] = try await ana.store.attach(doorPhoto, contentType: "image/jpeg").jsonValue
            }
            let uuid = try await ana.create("visits", visit)
            if families.isEmpty { doorVisit = uuid }
            families.append(person)
        }
        _ = try? await ana.engine.sync()
        narrator.say("Ana captures 3 people and 3 visits with no network, one with a photo of the house front. Her phone says:")
        narrator.quote(StatusMessage.text(for: await ana.engine.currentStatus))
        if let line = StatusMessage.attachmentText(for: await ana.engine.currentStatus) { narrator.quote(line) }

        narrator.heading("Signal again, but the answer is lost")
        ana.network.isOffline = false
        ana.network.inject(.dropResponse) { $0.target.hasPrefix("/v1/push") }
        _ = try? await ana.engine.sync()
        let checking = try await ana.store.outboxSummary().awaitingConfirmation
        narrator.say("Her upload reaches the server, but the answer never reaches her: \(checking) changes are \"checking result\".")
        let resend = try await ana.engine.sync()
        narrator.say("The next sync resends them with the same sequence numbers: the server answers duplicate for \(resend.duplicates), stores nothing twice.")

        narrator.heading("The photo reaches the coordinator")
        _ = try await carla.engine.sync()
        if let doorVisit, let record = try await carla.store.get(in: "visits", doorVisit),
            let photo = record.value["photo"].flatMap(AttachedFile.init)
        {
            let download = carla.store.attachmentData(photo)
            var steps = 0
            for try await _ in download { steps += 1 }
            let bytes = try await download.data
            narrator.say(
                "Carla opens Lucía's visit: the photo (\(bytes.count / 1000) kB, \(photo.contentType)) was uploaded before the visit, "
                    + "downloads on demand in \(steps) progress steps and matches its hash: \(bytes == doorPhoto ? "the same bytes Ana took" : "NOT the same bytes").")
        } else {
            narrator.say("Carla does not see Lucía's visit with its photo: something is wrong.")
        }

        narrator.heading("A slow network")
        bruno.network.inject(.delay(.milliseconds(3500))) { $0.target.hasPrefix("/v1/pull") }
        _ = try await bruno.create("people", ["name": "Tomás Silva", "section": 2])
        _ = try await bruno.engine.sync()
        narrator.say("Bruno's capture is confirmed, but the server's answers take 3.5 s. His phone says:")
        narrator.quote(StatusMessage.text(for: await bruno.engine.currentStatus))
        _ = try await bruno.engine.sync()

        narrator.heading("Two people edit one record")
        _ = try await carla.engine.sync()
        let shared = families[0]
        ana.network.isOffline = true
        carla.network.isOffline = true
        try await ana.edit("people", shared, notes: "Ana: moved to the second floor")
        try await carla.edit("people", shared, notes: "Carla: call before visiting")
        ana.network.isOffline = false
        carla.network.isOffline = false
        _ = try await ana.engine.sync()
        let lost = try await carla.engine.sync()
        narrator.say("Ana and Carla edited Lucía's record from the same version, both offline. Ana synced first.")
        if let conflict = lost.conflicts.first {
            let kept = (try? conflict.localChange?.jsonText()) ?? "{}"
            narrator.say("Carla is told; her edit is kept so she can apply it again: \(kept)")
        }

        narrator.heading("A delete while the create is in flight")
        let gate = FaultInjectingTransport.Gate()
        bruno.network.inject(.hold(gate)) { $0.target.hasPrefix("/v1/push") }
        let mistake = try await bruno.create("people", ["name": "Duplicate entry", "section": 2])
        let upload = Task { try await bruno.engine.sync() }
        try await gate.waitForArrivals()
        try await bruno.delete("people", mistake)
        gate.open()
        _ = try await upload.value
        _ = try await bruno.engine.sync()
        let tombstone = try server.database.read {
            try $0.first("SELECT deleted FROM records WHERE uuid = ?", [.text(mistake.wireText)])?.bool(0)
        }
        narrator.say("Bruno deletes a record while its upload is on the way. The server stored it, then deleted it: tombstone \(tombstone == true ? "present" : "missing"); it does not come back.")

        narrator.heading("A family, offline")
        bruno.network.isOffline = true
        let parent = try await bruno.create("people", ["name": "Família Costa", "section": 7])
        for child in 0..<2 {
            _ = try await bruno.create(
                "visits", ["person": .string(parent.wireText), "visited_at": .string(ServerTimestamp(Date()).rawValue), "notes": .string("child \(child + 1)")])
        }
        bruno.network.isOffline = false
        let family = try await bruno.engine.sync()
        narrator.say("A person and two visits created offline arrive in order: \(family.confirmed) confirmed, \(family.rejected.count) refused.")

        narrator.heading("Twenty phones come back at once")
        let storm = try (0..<20).map { try device("Phone \($0)", "worker-\($0)", .field, "south", jitter: .seconds(2)) }
        let startTimes = StartTimes()
        let stormStart = Date()
        for phone in storm {
            await phone.engine.registerRefresh("home screen") { startTimes.add(Date().timeIntervalSince(stormStart)) }
            await phone.engine.receive(PathHint(isConnected: false))
        }
        for phone in storm { await phone.engine.receive(PathHint(isConnected: true)) }
        let deadline = Date() + 10
        while startTimes.count < storm.count && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let times = startTimes.all
        narrator.say(String(format: "Their refreshes start spread over %.1f s (first at %.2f s, last at %.2f s), not in a storm.", (times.max() ?? 0) - (times.min() ?? 0), times.min() ?? 0, times.max() ?? 0))
        for phone in storm { await phone.engine.waitForIdle() }

        narrator.heading("Live")
        await carla.engine.start()
        let liveBy = Date() + 10
        while await carla.engine.currentStatus.live != .live && Date() < liveBy { try await Task.sleep(for: .milliseconds(10)) }
        narrator.say("Carla keeps the app open: her phone holds a live channel to the server.")
        narrator.quote(StatusMessage.liveText(for: await carla.engine.currentStatus))
        let doorstep = try await bruno.create("people", ["name": "Inés Duarte", "section": 7])
        let sending = Date()
        let sendingTask = Task { try await bruno.engine.sync() }
        while try await carla.store.get(in: "people", doorstep) == nil && Date() < sending + 10 {
            try await Task.sleep(for: .milliseconds(1))
        }
        let seen = Date().timeIntervalSince(sending)
        _ = try await sendingTask.value
        narrator.say(String(format: "Bruno captures a family at the door; it is on Carla's phone %.0f ms after his phone began sending it, with no sync by hand.", seen * 1000))
        carla.network.isOffline = true
        await carla.engine.receive(PathHint(isConnected: false))
        let whileAway = try await bruno.create("people", ["name": "Pavel Orlov", "section": 7])
        _ = try await bruno.engine.sync()
        carla.network.isOffline = false
        await carla.engine.receive(PathHint(isConnected: true))
        let backBy = Date() + 10
        while Date() < backBy {
            let arrived = try await carla.store.get(in: "people", whileAway) != nil
            let live = await carla.engine.currentStatus.live == .live
            if arrived && live { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        let streams = carla.network.delivered(to: "/v1/stream").count
        narrator.say(
            "Her network drops for a moment while Bruno captures another. Back online, her phone takes a fresh snapshot "
                + "(it brings Pavel) before it goes live again on a new stream (\(streams) opened today); nothing from the old one is replayed.")
        await carla.engine.stop()

        narrator.heading("Evening")
        narrator.say("Everyone syncs; the checker compares the server's database with every phone's.")
        for _ in 0..<2 {
            for person in team { _ = try? await person.engine.sync() }
        }
        let everyone = team + storm
        let report = try await InvariantChecker.check(server: server, devices: everyone.map(\.checked))
        let written = everyone.reduce(0) { $0 + $1.ledger.writeCount }
        let onServer = try server.database.read {
            try $0.first("SELECT COUNT(*) FROM records WHERE collection != 'catalogs'")?.int(0) ?? 0
        }
        let applied = try server.database.read {
            try $0.first("SELECT COUNT(*) FROM mutation_results WHERE result LIKE '%\"status\":\"applied\"%'")?.int(0) ?? 0
        }
        let duplicates = report.violations.filter { $0.invariant == "I2" }.count
        let resurrected = report.violations.filter { $0.invariant == "I3" }.count
        var conflicts = 0
        for person in everyone { conflicts += try await person.store.conflicts().count }
        for person in everyone { await person.engine.stop() }

        narrator.table([
            ("writes made on phones", "\(written)"),
            ("changes applied by the server", "\(applied)"),
            ("records on the server", "\(onServer)"),
            ("duplicates", "\(duplicates)"),
            ("resurrected", "\(resurrected)"),
            ("conflicts reported", "\(conflicts)"),
            ("invariants checked", "I1-I10, \(report.checks.values.reduce(0, +)) facts"),
            ("violations", "\(report.violations.count)"),
            ("time", String(format: "%.1f s", Date().timeIntervalSince(started))),
        ])
        for violation in report.violations { Terminal.error(violation.description) }
        guard report.isClean else { throw CommandFailure("An invariant broke; see the lines above.") }
        narrator.say("Every invariant held.")
        if console { try await keepServingTheConsole(server, at: base) }
    }

    /// Keeps the demo's server up until Ctrl-C, with an administrator's
    /// token to open the console with.
    static func keepServingTheConsole(_ server: SyncServer, at base: URL) async throws {
        let token = try server.tokens.issue(user: "dora", role: .admin, team: "hq", ttl: 8 * 3_600)
        print("")
        print("The console: open \(base.absoluteString)/admin and sign in with this administrator's token:")
        print(token)
        print("Ctrl-C stops the server and removes the demo's folder.")
        fflush(nil)
        signal(SIGINT, SIG_IGN)
        let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .main)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            interrupt.setEventHandler { done.resume() }
            interrupt.resume()
        }
        interrupt.cancel()
    }
}

/// Refresh start times collected from many engines.
final class StartTimes: Sendable {
    private let times = Locked<[Double]>([])
    func add(_ time: Double) { times.withLock { $0.append(time) } }
    var count: Int { times.withLock { $0.count } }
    var all: [Double] { times.current }
}

/// Plain narration on stdout; headings in bold on a terminal.
struct Narrator {
    let quiet: Bool
    let bold = isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil

    func heading(_ text: String) {
        guard !quiet else { return }
        print(bold ? "\n\u{1B}[1m\(text)\u{1B}[0m" : "\n\(text)")
    }

    func say(_ text: String) {
        guard !quiet else { return }
        print("  \(text)")
    }

    func quote(_ text: String) {
        guard !quiet else { return }
        print("    “\(text)”")
    }

    func table(_ rows: [(String, String)]) {
        let width = rows.map(\.0.count).max() ?? 0
        print("")
        for (label, value) in rows {
            print("  \(label.padding(toLength: width, withPad: " ", startingAt: 0))  \(value)")
        }
    }
}
