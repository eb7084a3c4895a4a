import Foundation
import Outpost
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// Three `outpost serve` on one PostgreSQL behind haproxy (Debian's, started
/// by the test, round robin): devices running the library sync through it,
/// their pushes and pulls land on different servers, and a server SIGKILLed
/// while they push loses nothing and applies nothing twice.
@Suite(
    "Servers behind haproxy",
    .enabled(if: Backend.postgresURL != nil && ReverseProxy.isInstalled(.haproxy), "needs scripts/with-postgres and haproxy"),
    .timeLimit(.minutes(4))
)
struct ServersBehindHAProxyTests {
    @Test func devicesSyncThroughThreeServersAndOneKilledMidPushLosesNothing() async throws {
        let directory = try TemporaryDirectory()
        let (database, location) = try Backend.postgres.makeDatabase(in: directory)
        defer { database.close() }
        let logs = (0..<3).map { directory.path("server-\($0).log") }
        var servers: [RunningServer] = []
        for log in logs { servers.append(try await runBlocking { try OutpostProcess.serve(location, log: log) }) }
        defer { for server in servers { server.stop() } }
        let proxy = try await ReverseProxy(.haproxy, upstreamPorts: servers.map { UInt16($0.base.port!) })
        let tokens = try (0..<3).map { index in
            try TokenStore(database: database).issue(user: "f-\(index)", role: .field, team: "t-1", ttl: nil)
        }

        struct Device: Sendable {
            let store: LocalStore
            let engine: SyncEngine
        }
        var devices: [Device] = []
        for (index, token) in tokens.enumerated() {
            let store = try LocalStore(path: directory.path("device-\(index).sqlite"), collections: [CollectionDescriptor(name: "people")])
            var options = SyncOptions()
            options.liveUpdates = false
            options.periodicInterval = nil
            options.pushBatchSize = 5
            options.requestTimeout = 20
            devices.append(
                Device(store: store, engine: SyncEngine(store: store, transport: URLSessionTransport(baseURL: proxy.base), token: token, options: options)))
        }

        /// Syncs until the outbox is empty, through whatever the servers answer meanwhile.
        func drain(_ device: Device) async throws {
            for _ in 0..<40 {
                _ = try? await device.engine.sync(timeout: .seconds(30))
                let summary = try await device.store.outboxSummary()
                if summary.pending + summary.sending + summary.awaitingConfirmation == 0 { return }
                try await Task.sleep(for: .milliseconds(100))
            }
            throw WaitTimedOut("a device's outbox drained through haproxy", timeout: .seconds(60))
        }

        let all = devices
        var created: [Int: Set<UUID>] = [:]
        for round in 0..<4 {
            for (index, device) in devices.enumerated() {
                for item in 0..<15 {
                    let uuid = try await device.store.create(in: "people", ["name": .string("D\(index)-\(round)-\(item)")])
                    created[index, default: []].insert(uuid)
                }
            }
            if round == 1 {
                // One server dies while the devices push.
                let victim = servers[1]
                async let syncs: Void = withThrowingTaskGroup(of: Void.self) { group in
                    for device in all { group.addTask { try await drain(device) } }
                    try await group.waitForAll()
                }
                try await Task.sleep(for: .milliseconds(30))
                victim.process.signal(SIGKILL)
                victim.process.waitUntilExit()
                try await syncs
            } else {
                for device in devices { try await drain(device) }
            }
        }
        // A last pull each, so every device holds what the server has for it.
        for device in devices { try await drain(device) }

        let stored = try database.read { sql in
            try sql.query("SELECT owner, uuid FROM records WHERE collection = 'people'", [])
        }
        #expect(stored.count == 180, "each capture stored exactly once")
        for (index, device) in devices.enumerated() {
            let owned = Set(stored.filter { $0.string(0) == "f-\(index)" }.compactMap { UUID(uuidString: $0.string(1)) })
            #expect(owned == created[index], "device \(index)'s captures, all there, none twice")
            let local = try await device.store.query(RecordQuery("people"))
            #expect(Set(local.map(\.uuid)) == created[index])
            let summary = try await device.store.outboxSummary()
            #expect(summary.rejected == 0 && summary.held == 0)
        }
        // The turns went round: pushes and pulls reached more than one server.
        for path in ["/v1/push", "/v1/pull"] {
            let reached = logs.filter { log in
                ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains(#""path":"\#(path)""#)
            }.count
            #expect(reached >= 2, "\(path) reached \(reached) server(s)")
        }
        for device in devices { await device.store.close() }
    }
}
