public import Foundation
public import Outpost
import OutpostCore
public import OutpostServer
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
    private var token: String
    private let seed: UInt64
    private var restarts: UInt64 = 0
    static let collections = [
        CollectionDescriptor(name: "people", indexedFields: ["name"]),
        CollectionDescriptor(name: "visits", references: ["person": "people"]),
    ]

    public init(
        name: String, principal: Principal, path: String, token: String, network: SimulatedNetwork, now: Date,
        skew: TimeInterval, seed: UInt64, monotonic: ManualMonotonicClock
    ) throws {
        self.name = name
        self.principal = principal
        self.path = path
        self.token = token
        self.network = network
        self.seed = seed
        self.monotonic = monotonic
        wallClock = ManualWallClock(now + skew)
        (store, engine) = try Self.open(path: path, token: token, network: network, clock: wallClock, seed: seed, monotonic: monotonic)
    }

    private static func open(
        path: String, token: String, network: SimulatedNetwork, clock: ManualWallClock, seed: UInt64,
        monotonic: ManualMonotonicClock
    ) throws -> (LocalStore, SyncEngine) {
        let store = try LocalStore(path: path, collections: collections, clock: clock, ids: UUIDv7Generator.seeded(seed, clock: clock))
        var options = SyncOptions()
        options.periodicInterval = nil
        options.reconnectJitter = .zero
        options.pushBatchSize = 20
        options.pullPageSize = 25
        let engine = SyncEngine(store: store, transport: network, token: token, options: options, clock: monotonic, seed: seed)
        return (store, engine)
    }

    /// The process dies: memory (in-flight set, engine state) is lost, the
    /// database file stays. The device comes back up at once.
    public func crashAndRestart() async throws {
        await engine.stop()
        await store.close()
        restarts += 1
        (store, engine) = try Self.open(
            path: path, token: token, network: network, clock: wallClock, seed: seed &+ restarts, monotonic: monotonic)
        network.crashRequested = false
    }

    /// The person signs in again with a new token.
    public func signIn(_ newToken: String) async {
        token = newToken
        await engine.updateToken(newToken)
        await engine.waitForIdle()
    }

    /// Moves the device's wall clock (a skewed clock must change nothing).
    public func skewClock(by seconds: TimeInterval) {
        wallClock.advance(by: seconds)
    }

    public var checked: CheckedDevice {
        CheckedDevice(name: name, store: store, principal: principal, ledger: ledger)
    }
}
