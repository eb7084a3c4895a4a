import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostSQLite
import OutpostTesting

/// How one simulation run is set up. Everything else follows from `seed`.
public struct SimulationConfig: Sendable {
    public var seed: UInt64
    public var devices: Int
    public var operations: Int
    /// Percent of requests that meet a fault.
    public var faultRate: Int
    /// Receives one line per workload step, fault and sync when set: what a
    /// replayed seed did, to find where a record went wrong.
    public var trace: (@Sendable (String) -> Void)?
    /// Devices keep live channels between cycles, with live-channel faults,
    /// and converge at the end through them alone (no manual sync).
    public var liveChannels: Bool
    /// Whether the server's and the devices' commits are synced to their
    /// disks (the product's default). Off, power losses must break
    /// invariants: the check that the simulation's power loss bites.
    public var durableCommits: Bool
    /// The server resolves conflicts of every writable collection by field
    /// (`merge_fields`) instead of letting its copy win.
    public var mergeFields: Bool
    /// A PostgreSQL cluster (`postgres://…`): the server runs on a database
    /// of its own there, `people` is a table of the app's own, and the
    /// company's backend writes to it as one more actor.
    public var ownTables: String?

    public init(
        seed: UInt64, devices: Int = 4, operations: Int = 60, faultRate: Int = 15, liveChannels: Bool = true,
        durableCommits: Bool = true, mergeFields: Bool = false, ownTables: String? = nil,
        trace: (@Sendable (String) -> Void)? = nil
    ) {
        self.seed = seed
        self.devices = max(1, devices)
        self.operations = operations
        self.faultRate = faultRate
        self.liveChannels = liveChannels
        self.durableCommits = durableCommits
        self.mergeFields = mergeFields
        self.ownTables = ownTables
        self.trace = trace
    }

    /// The one-line command that replays this run.
    public var replayCommand: String {
        "outpost simulate --from \(seed) --seeds 1 --devices \(devices) --ops \(operations)" + (liveChannels ? "" : " --no-live")
            + (durableCommits ? "" : " --no-durable-commits") + (mergeFields ? " --merge-fields" : "")
            + (ownTables == nil ? "" : " --own-tables")
    }
}

/// What one run did and found.
public struct SimulationResult: Sendable {
    public var config: SimulationConfig
    public var writes = 0
    public var syncs = 0
    public var faults: [FaultKind: Int] = [:]
    public var conflicts = 0
    public var rejected = 0
    public var violations: [Violation] = []
    public var checks: [String: Int] = [:]
}

/// The deterministic multi-device simulation: real stores and engines on a
/// simulated network, the real server's request handling on SQLite, one
/// seed for the workload, the faults and the clocks. Devices take turns, one
/// awaited step at a time, so a seed replays exactly. After the workload the
/// network heals, every device syncs until quiet, and I1-I10 are checked.
public enum Simulation {
    public static func run(_ config: SimulationConfig) async throws -> SimulationResult {
        var random = SeededRandom(seed: config.seed)
        let trace = config.trace ?? { _ in }
        var result = SimulationResult(config: config)
        let directory = try TemporaryDirectory(prefix: "outpost-sim")
        let serverClock = ManualWallClock(Date(timeIntervalSince1970: 1_796_000_000))
        let backend = try config.ownTables.map { try SimulatedBackend(clusterURL: $0, seed: config.seed) }
        defer { backend?.close() }
        // A small body limit, so oversized captures and batches meet it.
        var serverConfig = try backend?.serverConfig(mergeFields: config.mergeFields) ?? ServerConfig()
        serverConfig.sequencesInBackground = false
        serverConfig.buildsPagesAhead = false
        serverConfig.maxBodyBytes = Self.maxBodyBytes
        if config.mergeFields {
            for (name, schema) in serverConfig.collections where !schema.readOnly {
                serverConfig.collections[name]?.policy = .mergeFields
            }
        }
        // Nothing a stream sends may depend on real time: no heartbeat or
        // maximum duration within a run, and the token checked at every event.
        serverConfig.heartbeatSeconds = 86_400
        serverConfig.maxStreamSeconds = 86_400
        serverConfig.liveTokenRecheck = .zero
        // Writes wait 20 ms for a lock held elsewhere (a frozen server), then answer 503.
        let serverPath = directory.path("server.sqlite")
        // The server's disk can lose its power: its database and its blobs'
        // folder keep only what was synced.
        let serverDisk = try FaultyDisk(keepingOnlySynced: [serverPath + ".blobs"])
        let durability: Durability = config.durableCommits ? .powerLoss : .processCrash
        func openServer(_ durability: Durability) throws -> SyncServer {
            // On PostgreSQL the database keeps what it committed: a power loss is the server's restart.
            if let backend {
                return try SyncServer(
                    database: try PostgresDatabase(url: backend.location, poolSize: 2), config: serverConfig, clock: serverClock)
            }
            return try SyncServer(
                database: try SQLiteServerDatabase(path: serverPath, lockWait: 0.02, vfs: serverDisk.name, durability: durability),
                config: serverConfig, clock: serverClock)
        }
        // Set up (the schema, the devices' tokens) on synced commits; the run itself on `durability`.
        var server = try openServer(.powerLoss)
        let transport = ServerTransport(server: server, disk: serverDisk)
        // The live channel's steps and faults draw from their own stream, so
        // the workload's draws stay what they were without live channels.
        var liveRandom = SeededRandom(seed: config.seed ^ 0x4C49_5645_4C49_4E45)

        var devices: [SimulatedDevice] = []
        for index in 0..<config.devices {
            let principal = Self.principal(for: index)
            let token = try server.tokens.issue(user: principal.user, role: principal.role, team: principal.team, ttl: nil)
            let skew = random.next() % 3 == 0 ? TimeInterval(Int64(random.next() % 345_600) - 172_800) : 0
            if skew != 0 { result.faults[.clockSkew, default: 0] += 1 }
            let network = SimulatedNetwork(server: transport, seed: random.next(), faultRate: config.faultRate)
            devices.append(
                try SimulatedDevice(
                    name: "device-\(index)-\(principal.user)", principal: principal, path: directory.path("device-\(index).sqlite"),
                    token: token, network: network, now: serverClock.now(), skew: skew, seed: random.next(),
                    monotonic: ManualMonotonicClock(), live: config.liveChannels, durability: durability))
        }
        server.database.close()
        server = try openServer(durability)
        transport.restarted(as: server)

        /// The server's machine loses its power (now, or already during a
        /// request) and starts again on what its disk kept; every device's
        /// live stream dies with the old process.
        func restartServer() async throws {
            if !serverDisk.isPoweredOff { serverDisk.losePower() }
            server.database.close()
            serverDisk.powerOn()
            server = try openServer(durability)
            transport.restarted(as: server)
            for device in devices { try await device.serverRestarted() }
        }
        // A small storage budget, so synced photos are evicted during the run.
        for device in devices { try await device.store.setAttachmentStorageBudget(Self.attachmentBudget) }
        var cursors: [Int: Int64] = [:]
        var mark = 0
        // Disks that are full (or fail syncs), with the operation at which they heal.
        var fullUntil: [Int: Int] = [:]

        for operation in 0..<config.operations {
            for (index, until) in fullUntil where until <= operation {
                devices[index].disk.heal()
                fullUntil[index] = nil
            }
            // Live channels take a step about every other operation, and meet
            // faults twice as often as requests do (they are fewer).
            if config.liveChannels, liveRandom.next() % 100 < 60 {
                let liveIndex = Int(liveRandom.next() % UInt64(devices.count))
                let live = devices[liveIndex]
                _ = try await live.liveStep(
                    random: &liveRandom, faultRate: min(100, config.faultRate * 2),
                    trace: { trace("\(operation) \(live.name): \($0)") })
                if let violation = try await checkCursor(live, liveIndex, &cursors) {
                    result.violations.append(violation)
                }
            }
            if try backend?.step(
                server: server, owners: devices.map { ($0.principal.user, $0.principal.team) },
                trace: { trace("\(operation) \($0)") }) == true
            {
                result.faults[.backendWrite, default: 0] += 1
            }
            let index = Int(random.next() % UInt64(devices.count))
            let device = devices[index]
            let step = "\(operation) \(device.name):"
            try await device.settleLive()
            serverClock.advance(by: Double(random.next() % 30))
            device.skewClock(by: Double(random.next() % 30))
            // The phone's own backups, now and then: what a restore brings back.
            if random.next() % 40 == 0 {
                try device.takeBackup()
                trace("\(step) backup taken")
            }
            if random.next() % 100 < 7 {
                let kind = random.next() % 10
                // A restored database starts again from the backup's cursor:
                // the cursor check starts again with it.
                if kind == 0 && device.hasBackup { cursors[index] = nil }
                // Another SQLite connection freezes inside a write: the SQLite server's fault.
                if kind == 7 && backend != nil { continue }
                if kind == 7 {
                    trace("\(step) sync beside a frozen server")
                    try await syncBesideAFrozenServer(device, serverPath: serverPath, vfs: serverDisk.name)
                    result.faults[.serverFrozen, default: 0] += 1
                    result.syncs += 1
                    continue
                }
                if kind == 8 || kind == 9 {
                    // The power goes at some write or sync of the device's
                    // next sync (or of the server handling it), or of the
                    // device's next capture (with its photo, now and then),
                    // or right after when those did fewer.
                    let onServer = kind == 9
                    let duringCapture = !onServer && random.next() % 3 == 0
                    // A capture does a few writes and syncs; a sync, dozens.
                    let moment = Int(random.next() % (duringCapture ? 16 : 60))
                    trace(
                        "\(step) \(onServer ? "the server" : "the device") loses its power at write or sync \(moment) of "
                            + (duringCapture ? "a capture" : "a sync"))
                    (onServer ? serverDisk : device.disk).losePower(after: moment)
                    if duringCapture {
                        do {
                            let uuid = try await device.store.write { transaction in
                                var data: JSONObject = ["name": .string("Captured as the power went \(moment)")]
                                if moment % 2 == 0 {
                                    var bytes = SeededRandom(seed: UInt64(moment) &+ config.seed)
                                    data["photo"] = try transaction.attach(Data(bytes.bytes(2_000 + moment * 500)), contentType: "image/jpeg").jsonValue
                                }
                                return try transaction.create(in: "people", data)
                            }
                            // It returned: it was promised, power or not.
                            device.ledger.recordCreate(uuid)
                            result.writes += 1
                            trace("\(step) create people \(uuid.wireText) (returned)")
                        } catch let error as StoreError where error.isStorageFault {
                            trace("\(step) the capture failed as the power went: \(error)")
                        }
                    } else {
                        let outcome: Result<SyncReport, any Error>
                        do {
                            outcome = .success(try await device.engine.sync(timeout: .seconds(30)))
                        } catch {
                            outcome = .failure(error)
                        }
                        trace("\(step) sync: \(Self.describe(outcome))")
                        result.syncs += 1
                    }
                    if onServer {
                        try await restartServer()
                        result.faults[.serverPowerLoss, default: 0] += 1
                    } else {
                        try await device.losePowerAndRestart()
                        // Pages from the server commit without a flush: the
                        // power may take the last ones with their cursor.
                        cursors[index] = nil
                        result.faults[.devicePowerLoss, default: 0] += 1
                    }
                    continue
                }
                try await injectDeviceFault(
                    kind, device: device, index: index, devices: &devices, fullUntil: &fullUntil,
                    operation: operation, random: &random, directory: directory, config: config, result: &result,
                    trace: { trace("\(step) \($0)") })
                continue
            }
            let roll = random.next() % 100
            do {
                switch roll {
                case 0..<24:
                    let uuid = try await device.store.create(
                        in: "people", ["name": .string("Person \(random.next() % 1000)"), "section": .int(Int64(random.next() % 9))])
                    device.ledger.recordCreate(uuid)
                    trace("\(step) create people \(uuid.wireText)")
                    result.writes += 1
                case 24..<34:
                    let people = try await device.store.query(RecordQuery("people"))
                    guard !people.isEmpty else { continue }
                    let parent = people[Int(random.next() % UInt64(people.count))]
                    var data: JSONObject = ["person": .string(parent.uuid.wireText), "visited_at": "2026-11-29T10:00:00Z"]
                    // Half the visits come with a photo of the house front.
                    var photo = ""
                    if random.next() % 2 == 0 {
                        let attachment = try await device.attachPhoto(size: 1_000 + Int(random.next() % 60_000), seed: random.next())
                        data["photo"] = attachment.jsonValue
                        photo = " with photo \(attachment.sha256.prefix(8)) (\(attachment.size) bytes)"
                    }
                    let uuid = try await device.store.create(in: "visits", data)
                    device.ledger.recordCreate(uuid)
                    trace("\(step) create visits \(uuid.wireText) for \(parent.uuid.wireText)\(photo)")
                    result.writes += 1
                case 34..<54:
                    let collection = random.next() % 3 == 0 ? "visits" : "people"
                    let records = try await device.store.query(RecordQuery(collection))
                    guard !records.isEmpty else { continue }
                    let target = records[Int(random.next() % UInt64(records.count))]
                    mark += 1
                    let text = "mark-\(config.seed)-\(index)-\(mark)"
                    // Conflicts resolved by field need edits of different fields
                    // of one record; otherwise every edit is of the notes.
                    let field = config.mergeFields && collection == "people" ? ["notes", "phone", "address"][Int(random.next() % 3)] : "notes"
                    var patch: JSONObject = [field: .string(text)]
                    if collection == "visits", random.next() % 4 == 0 {
                        // A better photo replaces the first.
                        patch["photo"] = try await device.attachPhoto(size: 1_000 + Int(random.next() % 30_000), seed: random.next()).jsonValue
                    }
                    try await device.store.update(in: collection, target.uuid, patch: patch)
                    device.ledger.recordUpdate(target.uuid, mark: text)
                    trace("\(step) update \(collection) \(target.uuid.wireText) \(field) \(text)")
                    result.writes += 1
                case 54..<61:
                    let collection = random.next() % 3 == 0 ? "visits" : "people"
                    let records = try await device.store.query(RecordQuery(collection))
                    guard !records.isEmpty else { continue }
                    let target = records[Int(random.next() % UInt64(records.count))]
                    try await device.store.delete(in: collection, target.uuid)
                    device.ledger.recordDelete(target.uuid)
                    trace("\(step) delete \(collection) \(target.uuid.wireText)")
                    result.writes += 1
                case 61..<85:
                    result.syncs += 1
                    let outcome: Result<SyncReport, any Error>
                    // Now and then the channel this cycle replaces keeps a
                    // read waiting: a stale event, delivered later.
                    let holdBack = config.liveChannels && liveRandom.next() % 4 == 0
                    do {
                        outcome = .success(try await device.holdingBackTheChannel(holdBack) {
                            try await device.engine.sync(timeout: .seconds(30))
                        })
                    } catch {
                        outcome = .failure(error)
                    }
                    try await device.settleLive()
                    trace("\(step) sync: \(Self.describe(outcome))")
                    if let violation = try await checkCursor(device, index, &cursors) { result.violations.append(violation) }
                    if case .success = outcome, let violation = try await checkFeedEnd(device, server: server) {
                        result.violations.append(violation)
                    }
                    // I9: no photo still to upload was evicted to fit the budget.
                    for problem in try await device.store.attachmentProblems() {
                        result.violations.append(Violation(invariant: "I9", detail: "\(device.name): \(problem)"))
                    }
                    if device.network.crashRequested { try await device.crashAndRestart() }
                case 85..<90:
                    device.network.isPartitioned.toggle()
                    trace("\(step) partitioned: \(device.network.isPartitioned)")
                    if device.network.isPartitioned { result.faults[.partition, default: 0] += 1 }
                case 90..<93:
                    result.faults[.crash, default: 0] += 1
                    trace("\(step) crash")
                    try await device.crashAndRestart()
                case 93..<95:
                    // The session expires on the server while the device works on.
                    let short = try server.tokens.issue(
                        user: device.principal.user, role: device.principal.role, team: device.principal.team, ttl: 30)
                    try await device.signIn(short)
                    serverClock.advance(by: 60)
                    trace("\(step) token expired: \(Self.describe(.success(await device.engine.lastCycleReport ?? SyncReport(trigger: .manual))))")
                    result.faults[.tokenExpiry, default: 0] += 1
                case 95..<98:
                    // Requests held back earlier finally reach the server.
                    trace("\(step) held requests delivered")
                    await device.network.deliverHeld()
                default:
                    if await device.engine.currentStatus.signInRequired {
                        let fresh = try server.tokens.issue(
                            user: device.principal.user, role: device.principal.role, team: device.principal.team, ttl: nil)
                        try await device.signIn(fresh)
                        trace("\(step) signed in again: \(Self.describe(.success(await device.engine.lastCycleReport ?? SyncReport(trigger: .manual))))")
                    }
                }
            } catch let error as StoreError {
                // A record deleted by a pull between the query and the write: a person would see it gone.
                if case .recordNotFound = error { continue }
                // An edit of a record the server's limits refuse (a malformed
                // capture's other fields): refused at the edit, the person saw it.
                if case .invalidRecord = error {
                    trace("\(step) edit refused at capture: \(error)")
                    continue
                }
                // The disk refused the write: the person saw it fail; nothing to hold the system to.
                if error.isStorageFault {
                    trace("\(step) write refused by the disk: \(error)")
                    continue
                }
                throw error
            }
        }

        // Quiescence: the network and the disks heal, everyone signs in, syncs until quiet.
        for device in devices {
            device.disk.heal()
            device.network.faultRate = 0
            device.network.isPartitioned = false
            await device.network.deliverHeld()
            let fresh = try server.tokens.issue(
                user: device.principal.user, role: device.principal.role, team: device.principal.team, ttl: nil)
            try await device.signIn(fresh)
            trace("\(device.name): signed in: \(Self.describe(.success(await device.engine.lastCycleReport ?? SyncReport(trigger: .manual))))")
        }
        trace("quiescence")
        // The backend's last writes are sequenced before the devices converge.
        if let backend, let count = try backend.drain(server) { trace("backend: \(count) queued row(s) sequenced") }
        if config.liveChannels {
            // Each device pushed and took a snapshot when it signed in; what
            // the others pushed after that reaches it on its live channel,
            // with no manual sync: steps until two passes in a row move no data.
            var quietPasses = 0
            var passes = 0
            while quietPasses < 2 && passes < 100 {
                passes += 1
                var moved = false
                for (index, device) in devices.enumerated() {
                    let outcome = try await device.liveStep(
                        random: &liveRandom, faultRate: 0, trace: { trace("quiescence \(device.name): \($0)") })
                    if outcome == .data { moved = true }
                    if let violation = try await checkCursor(device, index, &cursors) { result.violations.append(violation) }
                    if let violation = try await checkFeedEnd(device, server: server) { result.violations.append(violation) }
                }
                quietPasses = moved ? 0 : quietPasses + 1
            }
            if quietPasses < 2 {
                result.violations.append(Violation(invariant: "I6", detail: "the live channels still moved data after \(passes) passes"))
            }
        }
        for _ in 0..<(config.liveChannels ? 0 : 3) {
            for (index, device) in devices.enumerated() {
                do {
                    let report = try await device.engine.sync(timeout: .seconds(60))
                    trace("\(device.name): sync: \(Self.describe(.success(report)))")
                } catch {
                    result.violations.append(Violation(invariant: "I6", detail: "\(device.name) could not sync after healing: \(error)"))
                }
                if let violation = try await checkCursor(device, index, &cursors) { result.violations.append(violation) }
                if let violation = try await checkFeedEnd(device, server: server) { result.violations.append(violation) }
            }
        }
        for device in devices {
            let faults = device.network.faults
            for (kind, count) in faults { result.faults[kind, default: 0] += count }
            result.conflicts += try await device.store.conflicts().count
            result.rejected += try await device.store.rejectedRecords().count
        }
        let report = try await InvariantChecker.check(server: server, devices: devices.map(\.checked))
        result.violations += report.violations
        if let backend { result.violations += try backend.mismatches(server: server) }
        result.checks = report.checks
        for device in devices {
            await device.engine.stop()
            device.closeLiveLine()
            await device.store.close()
        }
        server.database.close()
        return result
    }

    /// One line for the trace: what a sync cycle did or why it failed.
    static func describe(_ outcome: Result<SyncReport, any Error>) -> String {
        switch outcome {
        case .success(let report):
            // A dictionary prints its keys in an order that depends on where
            // it sits in memory, so the same seed replayed could read
            // differently: records' fields and refusal reasons are written
            // out sorted, after the report's counts.
            var counts = report
            counts.conflicts = []
            counts.rejected = []
            let conflicts = report.conflicts.map { conflict in
                let local = conflict.localChange.map(Self.sortedText) ?? "nothing"
                let server = conflict.serverRecord.map { "v\($0.version)\($0.deleted ? " deleted" : "") \($0.data.map(Self.sortedText) ?? "{}")" }
                return "conflict \(conflict.record) \(conflict.op.rawValue): local \(local), server \(server ?? "none")"
            }
            let rejected = report.rejected.map { change in
                let errors = change.rejection.errors.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
                return "rejected \(change.record) \(change.rejection.op.rawValue): \(change.rejection.code) \(errors) \(change.rejection.message ?? "")"
            }
            return (["\(counts)"] + conflicts + rejected).joined(separator: "; ")
        case .failure(let error): return "failed: \(error)"
        }
    }

    /// A record's fields as canonical JSON text (keys sorted).
    static func sortedText(_ object: JSONObject) -> String {
        (try? object.jsonText()) ?? "unwritable"
    }

    /// Bytes of photos each device keeps (the default is 512 MiB): a few photos.
    static let attachmentBudget: Int64 = 120_000

    /// The server's body limit in the simulation (the default is 4 MiB):
    /// a capture over it alone, or a batch of large ones, meets it.
    static let maxBodyBytes = 48 * 1024

    /// Another server on the same database freezes inside a write
    /// transaction (a debugger, SIGSTOP, a paused VM): this device syncs
    /// meanwhile, and its push must meet a bounded wait and a 503, never a
    /// hang. Then the frozen process dies and its transaction rolls back.
    static func syncBesideAFrozenServer(_ device: SimulatedDevice, serverPath: String, vfs: String) async throws {
        // Through the server's disk, which holds what the server wrote and did not sync yet.
        let frozen = try SQLiteConnection(path: serverPath, vfs: vfs)
        defer { frozen.close() }
        _ = try frozen.run("BEGIN IMMEDIATE")
        _ = try frozen.run("UPDATE server_state SET value = value WHERE key = 'version'")
        _ = try? await device.engine.sync(timeout: .seconds(30))
        _ = try frozen.run("ROLLBACK")
    }

    /// Faults of the device itself rather than its network.
    static func injectDeviceFault(
        _ kind: UInt64, device: SimulatedDevice, index: Int, devices: inout [SimulatedDevice], fullUntil: inout [Int: Int],
        operation: Int, random: inout SeededRandom, directory: TemporaryDirectory, config: SimulationConfig,
        result: inout SimulationResult, trace: (String) -> Void
    ) async throws {
        do {
            switch kind {
            case 0:
                // A backup now, restored at a later fault of this kind.
                if device.hasBackup {
                    trace("restored from its backup")
                    try await device.restoreBackup()
                    result.faults[.restoredBackup, default: 0] += 1
                } else {
                    trace("backup taken")
                    try device.takeBackup()
                }
            case 1:
                guard devices.count < config.devices + 2 else { return }
                let network = SimulatedNetwork(server: device.network.server, seed: random.next(), faultRate: config.faultRate)
                let clone = try device.clone(
                    as: "\(device.name)-clone-\(devices.count)", path: directory.path("device-\(devices.count).sqlite"),
                    network: network, seed: random.next())
                devices.append(clone)
                trace("cloned as \(clone.name)")
                result.faults[.clonedDevice, default: 0] += 1
            case 2:
                // A full disk, or one whose syncs fail, until a later step.
                let syncsOnly = random.next() % 3 == 0
                device.disk.fail(syncsOnly ? .syncs : .writes)
                trace(syncsOnly ? "syncs fail" : "disk full")
                fullUntil[index] = operation + 1 + Int(random.next() % 6)
                result.faults[syncsOnly ? .syncsFail : .diskFull, default: 0] += 1
            case 3:
                // One write, somewhere in the next local transactions, fails.
                let after = Int(random.next() % 12)
                trace("one write fails after \(after)")
                device.disk.fail(.writes, after: after, sticky: false)
                result.faults[.ioError, default: 0] += 1
            case 4:
                if let damaged = try device.damageQueuedChange(pick: random.next()) {
                    trace("queued change damaged: \(damaged)")
                    result.faults[.damagedRow, default: 0] += 1
                }
            case 5:
                // Alone over the body limit, or a few that fit alone but not together.
                let alone = random.next() % 2 == 0
                let size = alone ? maxBodyBytes + 2_048 : maxBodyBytes / 3
                for _ in 0..<(alone ? 1 : 3) {
                    let uuid = try await device.store.create(
                        in: "people", ["name": .string("Large \(random.next() % 1000)"), "notes": .string(String(repeating: "x", count: size))])
                    device.ledger.recordCreate(uuid)
                    trace("create large people \(uuid.wireText)")
                    result.writes += 1
                }
                result.faults[.oversizedMutation, default: 0] += 1
            default:
                var value = JSONValue.string("deep")
                for _ in 0..<31 { value = .array([value]) }
                let uuid = try await device.store.create(in: "people", ["name": .string("Malformed"), "notes": value])
                device.ledger.recordCreate(uuid)
                trace("create malformed people \(uuid.wireText)")
                result.writes += 1
                result.faults[.malformedMutation, default: 0] += 1
            }
        } catch let error as StoreError where error.isStorageFault {
            // A write refused by a failing disk: the person saw it fail.
            trace("write refused by the disk: \(error)")
        } catch StoreError.invalidRecord {
            // Refused at capture: the device knew the server's limits.
            trace("refused at capture")
        }
    }

    /// Device roles: field users of two teams, a coordinator, and a second
    /// device of the first user (same person, another phone).
    static func principal(for index: Int) -> Principal {
        switch index {
        case 0: return Principal(user: "f-1", role: .field, team: "t-1")
        case 1: return Principal(user: "c-1", role: .coordinator, team: "t-1")
        case 2: return Principal(user: "f-2", role: .field, team: "t-1")
        case 3: return Principal(user: "f-1", role: .field, team: "t-1")
        default: return Principal(user: "f-\(index)", role: .field, team: "t-\(index % 2 + 1)")
        }
    }

    /// I6: a device's cursor never goes backwards.
    static func checkCursor(_ device: SimulatedDevice, _ index: Int, _ cursors: inout [Int: Int64]) async throws -> Violation? {
        guard let cursor = try await device.store.pullState(collections: device.store.syncedCollections).cursor,
            let version = decodeCursorVersion(cursor.rawValue)
        else { return nil }
        defer { cursors[index] = max(cursors[index] ?? 0, version) }
        if let previous = cursors[index], version < previous {
            return Violation(invariant: "I6", detail: "\(device.name)'s cursor went back from \(previous) to \(version)")
        }
        return nil
    }

    /// I10, after a sync that succeeded (the device has talked to the server
    /// since any loss, so it must have been told).
    static func checkFeedEnd(_ device: SimulatedDevice, server: SyncServer) async throws -> Violation? {
        try await InvariantChecker.feedEndViolation(device.checked, server: server).map {
            Violation(invariant: $0.invariant, detail: $0.detail + ", after a sync")
        }
    }

    /// The test reads the server's cursor format (clients never do).
    static func decodeCursorVersion(_ cursor: String) -> Int64? {
        var base64 = cursor.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), let text = String(data: data, encoding: .utf8) else { return nil }
        // `v1.<version>.<scope>` or `v2.<version>.<purged>.<scope>`: the
        // version is second in both. (Reading v1 alone, the cursor checks
        // saw no cursor at all once the server wrote v2.)
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (parts.first == "v1" && parts.count == 3) || (parts.first == "v2" && parts.count == 4) else { return nil }
        return Int64(parts[1])
    }
}
