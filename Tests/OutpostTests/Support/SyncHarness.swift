import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting
import Testing

/// Calls the real server's request handling in process: the whole protocol,
/// no socket. Faults are added by wrapping it in a `FaultInjectingTransport`.
struct InProcessTransport: SyncTransport {
    let server: SyncServer

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let answer = await server.respond(
            HTTPRequest(method: request.method, target: request.target, headers: request.headers, body: request.body ?? Data()))
        return TransportResponse(status: answer.status, headers: answer.headers, body: Data(answer.body))
    }
}

/// A real server (SQLite in a temp folder) and devices syncing with it through
/// the real engine and store, with injectable faults and a manual clock.
final class SyncHarness: @unchecked Sendable {
    // @unchecked Sendable: set up once; the parts are Sendable themselves.
    let directory: TemporaryDirectory
    let server: SyncServer
    let serverClock = ManualWallClock(Date(timeIntervalSince1970: 1_796_000_000))
    let clock = ManualMonotonicClock()

    init(config: ServerConfig? = nil) throws {
        directory = try TemporaryDirectory(prefix: "outpost-sync")
        let database = try SQLiteServerDatabase(path: directory.path("server.sqlite"))
        server = try SyncServer(database: database, config: config ?? ServerConfig(), clock: serverClock)
    }

    struct Device {
        let store: LocalStore
        let engine: SyncEngine
        let network: FaultInjectingTransport
        let monitor: ManualPathMonitor
        let deviceClock: ManualWallClock
    }

    /// A server that needs schema 2, and the options of an app that declares 1.
    static func serverAheadOfTheApp() throws -> (SyncHarness, SyncOptions) {
        var config = try ServerConfig()
        config.minSchema = 2
        var old = SyncOptions()
        old.periodicInterval = nil
        old.liveUpdates = false
        old.schemaVersion = 1
        old.clientName = "org.example.field/1.0"
        return (try SyncHarness(config: config), old)
    }

    /// A device with its own database, signed in as `user`.
    func device(
        _ user: String, role: Role = .field, team: String = "t-1", name: String? = nil, options: SyncOptions? = nil,
        deviceClockOffset: TimeInterval = 0, seed: UInt64? = nil, collections: [CollectionDescriptor] = [],
        credentials: CredentialsProvider? = nil
    ) throws -> Device {
        // Each device its own seed: equal seeds would make equal client ids.
        let seed = seed ?? (name ?? user).utf8.reduce(UInt64(1469598103934665603)) { ($0 ^ UInt64($1)) &* 1099511628211 }
        let deviceClock = ManualWallClock(serverClock.now() + deviceClockOffset)
        let store = try LocalStore(
            path: directory.path("\(name ?? user).sqlite"), collections: [Person.descriptor, Visit.descriptor] + collections,
            clock: deviceClock, ids: UUIDv7Generator.seeded(seed, clock: deviceClock))
        let network = FaultInjectingTransport(wrapping: InProcessTransport(server: server), clock: clock)
        let token = try server.tokens.issue(user: user, role: role, team: team, ttl: nil)
        var engineOptions = options ?? SyncOptions()
        if options == nil {
            engineOptions.periodicInterval = nil
            engineOptions.reconnectJitter = .zero
            engineOptions.liveUpdates = false
        }
        let monitor = ManualPathMonitor()
        let engine =
            if let credentials {
                SyncEngine(
                    store: store, transport: network, options: engineOptions, clock: clock, pathMonitor: monitor, seed: seed,
                    credentials: credentials)
            } else {
                SyncEngine(
                    store: store, transport: network, token: token, options: engineOptions, clock: clock, pathMonitor: monitor,
                    seed: seed)
            }
        return Device(store: store, engine: engine, network: network, monitor: monitor, deviceClock: deviceClock)
    }

    /// Every live record on the server, read directly from its database.
    func serverRecords(_ collection: String = "people") throws -> [(uuid: String, data: String?, deleted: Bool)] {
        try server.database.read { sql in
            try sql.query("SELECT uuid, data, deleted FROM records WHERE collection = ? ORDER BY version", [.text(collection)])
        }.map { ($0.string(0), $0.optionalString(1), $0.bool(2)) }
    }
}


