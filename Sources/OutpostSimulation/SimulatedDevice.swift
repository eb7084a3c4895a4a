public import Foundation
public import Outpost
public import OutpostCore
public import OutpostServer
import OutpostSQLite
public import OutpostTesting

/// One device in the simulation: the real store on a real SQLite file and
/// the real engine, on a simulated network, with a wall clock that may be
/// skewed. A crash drops everything in memory and keeps the database.
public final class SimulatedDevice: @unchecked Sendable {
    // @unchecked Sendable: driven by the simulation's single task, one step at a time.
    public let name: String
    public let principal: Principal
    public let path: String
    public let network: SimulatedNetwork
    public let monotonic: ManualMonotonicClock
    public private(set) var store: LocalStore
    public private(set) var engine: SyncEngine
    public var ledger = WriteLedger()
    public private(set) var wallClock: ManualWallClock
    /// The device's disk: it can fill up, fail a write or lose its power
    /// at any step (its photos' folder keeps only what was synced).
    public let disk: FaultyDisk
    /// Whether the store syncs every commit (the default; off only to show
    /// what a power loss takes without it).
    public let durability: Durability
    /// A copy of the database taken earlier (an iCloud backup), with what
    /// the person had written by then.
    private var backup: (path: String, ledger: WriteLedger)?
    private var token: String
    private let seed: UInt64
    /// Whether the engine keeps a live channel between cycles.
    public let live: Bool
    private var restarts: UInt64 = 0
    static let collections = [
        CollectionDescriptor(name: "people", indexedFields: ["name"]),
        CollectionDescriptor(name: "visits", references: ["person": "people"]),
    ]

    public init(
        name: String, principal: Principal, path: String, token: String, network: SimulatedNetwork, now: Date,
        skew: TimeInterval, seed: UInt64, monotonic: ManualMonotonicClock, live: Bool, durability: Durability = .powerLoss
    ) throws {
        self.disk = try FaultyDisk(keepingOnlySynced: [path + ".blobs"])
        self.durability = durability
        self.name = name
        self.principal = principal
        self.path = path
        self.token = token
        self.network = network
        self.seed = seed
        self.monotonic = monotonic
        self.live = live
        wallClock = ManualWallClock(now + skew)
        (store, engine) = try Self.open(
            path: path, token: token, network: network, clock: wallClock, seed: seed, monotonic: monotonic, disk: disk,
            live: live, durability: durability)
    }

    private static func open(
        path: String, token: String, network: SimulatedNetwork, clock: ManualWallClock, seed: UInt64,
        monotonic: ManualMonotonicClock, disk: FaultyDisk, live: Bool, durability: Durability
    ) throws -> (LocalStore, SyncEngine) {
        let open = {
            try LocalStore(
                path: path, collections: collections, clock: clock, ids: UUIDv7Generator.seeded(seed, clock: clock), vfs: disk.name,
                durability: durability)
        }
        let store: LocalStore
        do {
            store = try open()
        } catch let error as StoreError where error.isStorageFault {
            // The app could not start on a failing disk; the person frees
            // space and opens it again.
            disk.heal()
            store = try open()
        }
        var options = SyncOptions()
        // The engine is never started: every cycle is one the simulation
        // asks for, and the live channel runs between them, through the
        // network's live line, which answers nothing until the simulation
        // steps it (see SimulatedLiveLine.swift).
        options.liveUpdates = live
        options.liveWithoutStart = live
        options.periodicInterval = nil
        // Each device's monotonic clock moves only when the simulation moves
        // it (a silent socket, a backoff that must pass), and every timer it
        // wakes is awaited before the next step, so a seed replays exactly.
        // (A reconnection's jitter left at zero would start a sync at once
        // in the background, racing the next step.)
        options.reconnectJitter = .seconds(1)
        options.pushBatchSize = 20
        // One upload at a time: two at once would interleave as the threads
        // please, and a seed must replay exactly.
        options.attachmentUploadsAtOnce = 1
        options.pullPageSize = 25
        let engine = SyncEngine(store: store, transport: network, token: token, options: options, clock: monotonic, seed: seed)
        return (store, engine)
    }

    /// The process dies: memory (in-flight set, engine state) is lost, the
    /// database file stays. The device comes back up at once.
    public func crashAndRestart() async throws {
        try await settleLive()
        await engine.stop()
        closeLiveLine()
        await store.close()
        restarts += 1
        (store, engine) = try Self.open(
            path: path, token: token, network: network, clock: wallClock, seed: seed &+ restarts, monotonic: monotonic,
            disk: disk, live: live, durability: durability)
        network.crashRequested = false
    }

    /// The phone loses its power (now, or already while it worked): what
    /// was not synced to its disk is gone, and it starts again on the rest.
    public func losePowerAndRestart() async throws {
        if !disk.isPoweredOff { disk.losePower() }
        try? await settleLive()
        await engine.stop()
        closeLiveLine()
        await store.close()
        disk.powerOn()
        restarts += 1
        (store, engine) = try Self.open(
            path: path, token: token, network: network, clock: wallClock, seed: seed &+ restarts &* 104_729, monotonic: monotonic,
            disk: disk, live: live, durability: durability)
        network.crashRequested = false
    }

    /// The server lost its power and started again: the live stream's
    /// connection died with it.
    public func serverRestarted() async throws {
        network.live.serverRestarted()
        try await settleLive()
    }

    /// A backup of the device as it is now (a consistent copy, as iCloud
    /// or a backup tool takes it while the app runs).
    public func takeBackup() throws {
        let copy = path + ".backup"
        try? FileManager.default.removeItem(atPath: copy)
        // Read as the operating system shows the files (through the device's
        // disk, which holds what the store has not synced yet); written past
        // that disk's faults (the copy lives elsewhere).
        let connection = try SQLiteConnection(path: path, vfs: disk.name)
        defer { connection.close() }
        _ = try connection.run("VACUUM INTO ?", [.text(FaultyDisk.plainURI(copy))])
        // The photos' folder is part of the app's data: backed up with it.
        Self.copyFolder(path + ".blobs", to: copy + ".blobs")
        backup = (copy, ledger)
    }

    public var hasBackup: Bool { backup != nil }

    /// The phone is restored from the backup: the app restarts on the old
    /// database. What was written after the backup and never synced is gone
    /// with it (the person restored an older phone); everything after the
    /// restore must reach the server exactly once.
    public func restoreBackup() async throws {
        guard let backup else { return }
        try await settleLive()
        await engine.stop()
        closeLiveLine()
        await store.close()
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        try FileManager.default.copyItem(atPath: backup.path, toPath: path)
        Self.copyFolder(backup.path + ".blobs", to: path + ".blobs")
        // The restore wrote its files and synced them.
        disk.syncFiles()
        // No exemption: a create the replaced timeline sent and this copy
        // still holds as unsent must not come back after a local delete
        // (the 409 and the pull tell the device; see DoubtfulCreates.swift).
        // A clone made since the backup lives on: what it holds stays held
        // by another copy.
        let heldElsewhere = ledger.heldByAnotherCopy
        ledger = backup.ledger
        ledger.recordAnotherCopy(of: heldElsewhere)
        restarts += 1
        (store, engine) = try Self.open(
            path: path, token: token, network: network, clock: wallClock, seed: seed &+ restarts &* 7919, monotonic: monotonic,
            disk: disk, live: live, durability: durability)
    }

    /// The profile is copied to another computer: a second device with the
    /// same database, the same client id and the same queue.
    public func clone(as name: String, path clonePath: String, network: SimulatedNetwork, seed: UInt64) throws -> SimulatedDevice {
        let connection = try SQLiteConnection(path: path, vfs: disk.name)
        defer { connection.close() }
        try? FileManager.default.removeItem(atPath: clonePath)
        _ = try connection.run("VACUUM INTO ?", [.text(FaultyDisk.plainURI(clonePath))])
        Self.copyFolder(path + ".blobs", to: clonePath + ".blobs")
        ledger.recordAnotherCopy(of: ledger.created)
        let clone = try SimulatedDevice(
            name: name, principal: principal, path: clonePath, token: token, network: network, now: wallClock.now(), skew: 0,
            seed: seed, monotonic: ManualMonotonicClock(), live: live, durability: durability)
        // The clone holds everything this copy holds, records that came
        // from an earlier copy included (a clone of a clone).
        clone.ledger.recordAnotherCopy(of: ledger.created.union(ledger.heldByAnotherCopy))
        return clone
    }

    /// Breaks one stored queued change on disk (a bad sector, another
    /// program): its JSON no longer parses. Names the change, or nil when
    /// nothing is queued.
    public func damageQueuedChange(pick: UInt64) throws -> String? {
        // Through the device's disk: the store's connections hold what was not synced yet.
        let connection = try SQLiteConnection(path: path, vfs: disk.name)
        defer { connection.close() }
        let outbox = OutboxTable(connection: connection)
        let entries = try outbox.entriesWithData()
        guard !entries.isEmpty else { return nil }
        let picked = entries[Int(pick % UInt64(entries.count))]
        do {
            try outbox.damageData(of: picked.entry)
        } catch let error as SQLiteError where [.full, .ioError].contains(error.code) {
            // The disk is failing now (full, or a write fault armed): nothing was damaged.
            return nil
        }
        return picked.description
    }

    /// The person signs in again with a new token.
    public func signIn(_ newToken: String) async throws {
        token = newToken
        await engine.updateToken(newToken)
        try await settleLive()
    }

    /// Moves the device's wall clock (a skewed clock must change nothing).
    public func skewClock(by seconds: TimeInterval) {
        wallClock.advance(by: seconds)
    }

    /// Replaces `destination` with a copy of the folder (nothing when there is none).
    static func copyFolder(_ source: String, to destination: String) {
        try? FileManager.default.removeItem(atPath: destination)
        guard FileManager.default.fileExists(atPath: source) else { return }
        try? FileManager.default.copyItem(atPath: source, toPath: destination)
    }

    /// A photo taken at the door: seeded bytes attached to the store.
    public func attachPhoto(size: Int, seed: UInt64) async throws -> AttachedFile {
        var random = SeededRandom(seed: seed)
        return try await store.attach(Data(random.bytes(size)), contentType: "image/jpeg")
    }

    public var checked: CheckedDevice {
        CheckedDevice(name: name, store: store, principal: principal, ledger: ledger)
    }
}
