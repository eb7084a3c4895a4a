import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostSimulation
import OutpostTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Real processes, really killed: the `outpost` CLI syncing through the chaos
/// proxy is killed with SIGKILL at random moments, and `outpost serve` is
/// killed mid-push and restarted. Invariants are checked at the end.
@Suite("Process crashes", .serialized, .timeLimit(.minutes(10)))
struct ProcessCrashTests {
    static var executable: URL { CommandLineTests.executable }

    /// A running `outpost` child process.
    final class Child: @unchecked Sendable {
        // @unchecked Sendable: the process handle is only used from the test's task.
        let process: SpawnedProcess
        var output: FileHandle { process.standardOutput! }

        init(_ arguments: [String], environment: [String: String]) throws {
            process = try SpawnedProcess(ProcessCrashTests.executable, arguments, environment: environment, stdout: .pipe)
        }

        func kill9() {
            process.signal(SIGKILL)
            process.waitUntilExit()
        }

        func wait() -> (Int32, String) {
            let data = output.readDataToEndOfFile()
            return (process.terminationStatus, String(decoding: data, as: UTF8.self))
        }

        /// For `serve`: the port from its first line.
        func port() throws -> UInt16 {
            var buffer = Data()
            while !buffer.contains(UInt8(ascii: "\n")) {
                let chunk = output.availableData
                if chunk.isEmpty { throw CancellationError() }
                buffer += chunk
            }
            let line = String(decoding: buffer, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            return UInt16(line.split(separator: " ").last ?? "") ?? 0
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func clientsAndServerKilledMidSyncLoseNothingAndDuplicateNothing() async throws {
        let directory = try TemporaryDirectory(prefix: "outpost-crash")
        let databasePath = directory.path("server.sqlite")
        let environment = ["XDG_CONFIG_HOME": directory.path("config"), "XDG_DATA_HOME": directory.path("data"), "NO_COLOR": "1"]
        func run(_ arguments: [String]) async throws -> (Int32, String) {
            try await runBlocking { try Child(arguments, environment: environment).wait() }
        }
        let token = try await run(["token", "issue", "--database", databasePath, "--user", "ana", "--role", "field", "--team", "north"])
            .1.split(separator: "\n").last.map(String.init) ?? ""
        var server = try Child(["serve", "--database", databasePath, "--port", "0", "--quiet"], environment: [:])
        let port = try await runBlocking { [server] in try server.port() }
        let proxy = try ChaosProxy(upstreamPort: port)
        defer { proxy.stop() }
        #expect(try await run(["login", "--server", proxy.url.absoluteString, "--token", token]).0 == 0)

        var random = SeededRandom(seed: 77)
        var ledger = WriteLedger()
        var live: [UUID] = []
        var clientKills = 0
        var serverKills = 0
        for round in 0..<12 {
            for index in 0..<3 {
                let (status, out) = try await run(["add", "people", "name=Round \(round) person \(index)", "section:=\(round)"])
                #expect(status == 0)
                if let uuid = UUID.fromWire(out.trimmingCharacters(in: .whitespacesAndNewlines)) {
                    ledger.recordCreate(uuid)
                    live.append(uuid)
                }
            }
            if let target = live.randomElement(using: &random) {
                let mark = "crash-mark-\(round)"
                if try await run(["edit", target.wireText, "notes=\(mark)"]).0 == 0 { ledger.recordUpdate(target, mark: mark) }
            }
            if round % 4 == 3, let target = live.popLast() {
                if try await run(["delete", target.wireText]).0 == 0 { ledger.recordDelete(target) }
            }
            // Every mode makes a sync last over a second, so the kill lands mid-sync.
            proxy.mode = [ChaosMode.latency(.milliseconds(150)), .latency(.milliseconds(300)), .slowDrip(bytesPerSecond: 2_000)][
                Int(random.next() % 3)]
            let client = try Child(["sync", "--timeout", "20"], environment: environment)
            try await Task.sleep(for: .milliseconds(40 + Int(random.next() % 300)))
            if round % 3 == 1 {
                // The server dies mid-request and comes back on the same port.
                server.kill9()
                serverKills += 1
                server = try Child(["serve", "--database", databasePath, "--port", "\(port)", "--quiet"], environment: [:])
                _ = try await runBlocking { [server] in try server.port() }
            }
            if client.process.isRunning { clientKills += 1 }
            client.kill9()
        }
        #expect(clientKills >= 6, "syncs were killed mid-way")
        #expect(serverKills == 4)

        proxy.mode = .pass
        for _ in 0..<2 {
            let (status, out) = try await run(["sync"])
            #expect(status == 0, "healed sync: \(out)")
        }
        server.process.signal(SIGTERM)
        try await server.process.waitUntilExit(within: .seconds(30), "outpost serve exited on SIGTERM")

        let database = try SQLiteServerDatabase(path: databasePath)
        defer { database.close() }
        let syncServer = try SyncServer(database: database, config: ServerConfig())
        let store = try LocalStore(
            path: directory.path("data/outpost/default/device.sqlite"),
            collections: DefaultCollections.all.filter { !$0.readOnly }.map { CollectionDescriptor(schema: $0) })
        #expect(try await store.integrityProblems() == [])
        let report = try await InvariantChecker.check(
            server: syncServer,
            devices: [CheckedDevice(name: "cli", store: store, principal: Principal(user: "ana", role: .field, team: "north"), ledger: ledger)])
        #expect(report.violations == [])
        #expect((report.checks["I1"] ?? 0) >= 30)
        let people = try database.read { try $0.first("SELECT COUNT(*) FROM records WHERE collection = 'people' AND deleted = 0")?.int(0) }
        #expect(people == Int64(ledger.created.count - ledger.deleted.count), "every capture once, deletes done")
        await store.close()
    }
}
