import Foundation
import OutpostCore
import OutpostServer
import OutpostTesting
import Testing

/// The `outpost` command line, run as a subprocess as a person would.
@Suite("Command line", .timeLimit(.minutes(10)))
struct CommandLineTests {
    static var executable: URL { ChildProcess.product("outpost") }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// A person's computer: its own XDG folders, and a server it can reach or not.
    final class Workstation: @unchecked Sendable {
        // @unchecked Sendable: used from one test at a time; `http` is replaced only between commands.
        let directory: TemporaryDirectory
        let server: SyncServer
        var http: HTTPServer?
        var port: UInt16 = 0

        /// Where the device database lives (XDG_DATA_HOME); a test may put it on its own filesystem.
        let dataHome: String

        init(dataHome: String? = nil) throws {
            directory = try TemporaryDirectory(prefix: "outpost-cli")
            self.dataHome = dataHome ?? directory.path("data")
            server = try SyncServer(
                database: try SQLiteServerDatabase(path: directory.path("server.sqlite")), config: ServerConfig())
            try startServer()
        }

        /// On the port it had before, once it had one (the profile names it):
        /// in a full run another test's outgoing connection can hold that
        /// port for a moment, so binding is tried again for a few seconds.
        func startServer() throws {
            let server = self.server
            var attempts = 0
            while true {
                do {
                    let http = try HTTPServer(port: port, threads: 2, server: server)
                    port = http.port
                    self.http = http
                    return
                } catch let error as ServeError where port != 0 && attempts < 50 {
                    _ = error
                    attempts += 1
                    usleep(100_000)
                }
            }
        }

        func stopServer() {
            http?.stop()
            http = nil
        }

        var url: String { "http://127.0.0.1:\(port)" }

        func run(_ arguments: [String]) async throws -> Result {
            try await runBlocking { try self.runNow(arguments) }
        }

        private func runNow(_ arguments: [String]) throws -> Result {
            let output = try ChildProcess.run(
                CommandLineTests.executable, arguments,
                environment: [
                    "XDG_CONFIG_HOME": directory.path("config"), "XDG_DATA_HOME": dataHome, "NO_COLOR": "1",
                ])
            return Result(status: output.status, stdout: output.stdout, stderr: output.stderr)
        }

        func login(_ user: String = "ana") async throws {
            let token = try server.tokens.issue(user: user, role: .field, team: "north", ttl: nil)
            let result = try await run(["login", "--server", url, "--token", token])
            #expect(result.status == 0, "\(result.stderr)")
        }
    }

    @Test func watchPrintsEachChangeOfAnotherDeviceAsItArrives() async throws {
        let station = try Workstation()
        try await station.login()
        let token = try station.server.tokens.issue(user: "ana", role: .field, team: "north", ttl: nil)
        #expect(try await station.run(["login", "--server", station.url, "--token", token, "--profile", "phone"]).status == 0)
        let watch = try SpawnedProcess(
            CommandLineTests.executable, ["watch", "people"],
            environment: ["XDG_CONFIG_HOME": station.directory.path("config"), "XDG_DATA_HOME": station.dataHome, "NO_COLOR": "1"],
            stdout: .pipe)
        defer { watch.killIfRunning(after: .seconds(5)) }
        try await eventually("the watch keeps a live channel") { station.server.liveConnections == 1 }
        let added = try await station.run(["add", "people", "name=Bea", "--profile", "phone"])
        let uuid = added.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await station.run(["sync", "--profile", "phone"]).status == 0)
        let output = watch.standardOutput!
        let line = try await runBlocking { () -> String in
            var buffer = Data()
            while !String(decoding: buffer, as: UTF8.self).contains(uuid) {
                let chunk = output.availableData
                if chunk.isEmpty { break }
                buffer += chunk
            }
            return String(decoding: buffer, as: UTF8.self)
        }
        #expect(line.contains(" people \(uuid) ") && line.contains(#"name="Bea""#), "one line per change: time, collection, uuid, fields: \(line)")
        watch.signal(SIGINT)
        try await watch.waitUntilExit(within: .seconds(10), "watch stopped on Ctrl-C")
        #expect(watch.terminationStatus == 0)
    }

    @Test func captureWhileTheServerIsDownThenSyncOnceItIsUp() async throws {
        let station = try Workstation()
        try await station.login()
        station.stopServer()
        let added = try await station.run(["add", "people", "name=Ana", "section:=3"])
        #expect(added.status == 0)
        let uuid = added.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(UUID.fromWire(uuid) != nil, "add prints the new uuid")
        let offline = try await station.run(["sync"])
        #expect(offline.status == 1)
        #expect(offline.stderr.hasPrefix("error: You're offline."))
        #expect(try await station.run(["list"]).stdout.contains("\(uuid)  people   pending"))

        try station.startServer()
        let synced = try await station.run(["sync"])
        #expect(synced.status == 0, "\(synced.stderr)")
        #expect(synced.stdout.contains("sent 1, confirmed 1"))
        #expect(try await station.run(["list", "people"]).stdout.contains("synced"))
        let count = try station.server.database.read { try $0.first("SELECT COUNT(*) FROM records WHERE collection = 'people'")?.int(0) }
        #expect(count == 1)

        // A list cut at its limit says how many it left out.
        for name in ["Bea", "Caro"] { _ = try await station.run(["add", "people", "name=\(name)"]) }
        let cut = try await station.run(["list", "people", "--limit", "2"])
        #expect(cut.stdout.contains("… 2 of 3 people records shown (the newest); --limit 3 shows them all."), "\(cut.stdout)")
        #expect(!(try await station.run(["list", "people"])).stdout.contains(" shown "), "a whole list says nothing more")
    }

    @Test func statusWhileOfflineShowsTheLastSyncAndTheOfflineMessage() async throws {
        let station = try Workstation()
        try await station.login()
        #expect(try await station.run(["sync"]).status == 0)
        station.stopServer()
        #expect(try await station.run(["add", "people", "name=Bea"]).status == 0)
        let status = try await station.run(["status"])
        #expect(status.status == 0)
        #expect(status.stdout.contains("Connection:   offline"))
        #expect(status.stdout.contains("Data:         updated on "))
        #expect(status.stdout.contains("Changes:      1 waiting"))
        #expect(status.stdout.contains("You're offline. You can see data synced on "))
    }

    @Test func logoutWithUnsentChangesRefusesWithoutForce() async throws {
        let station = try Workstation()
        try await station.login()
        #expect(try await station.run(["add", "people", "name=Unsent"]).status == 0)
        let refused = try await station.run(["logout"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("1 change has not reached the server yet"))
        let database = station.directory.path("data/outpost/default/device.sqlite")
        #expect(FileManager.default.fileExists(atPath: database), "nothing was wiped")
        let forced = try await station.run(["logout", "--force"])
        #expect(forced.status == 0)
        for suffix in ["", "-wal", "-shm"] {
            #expect(!FileManager.default.fileExists(atPath: database + suffix), "\(suffix) wiped")
        }
        #expect(try await station.run(["list"]).stderr.contains("Not signed in"))
    }

    @Test func loginWithoutANetworkSavesNothing() async throws {
        let station = try Workstation()
        station.stopServer()
        let token = try station.server.tokens.issue(user: "ana", role: .field, team: "north", ttl: nil)
        let result = try await station.run(["login", "--server", station.url, "--token", token])
        #expect(result.status == 1)
        #expect(result.stderr.contains("you are not signed in"))
        #expect(try await station.run(["add", "people", "name=x"]).stderr.contains("Not signed in"))
    }

    @Test(arguments: [
        ["frobnicate"], ["add"], ["add", "people"], ["add", "people", "justaword"], ["edit", "not-a-uuid", "a=b"],
        ["list", "--bogus", "1"], ["serve", "--port", "99999"], ["token", "issue", "--user", "u", "--role", "king", "--team", "t"],
        ["sync", "extra"], ["simulate", "--seeds", "zero"], ["add", "people", "section:={bad"],
        ["serve", "--write-lock", "table"], ["serve", "--tls-cert", "x.pem"], ["serve", "--jwt-jwks", "keys.json"],
        ["serve", "--trusted-proxy", "proxy.internal"], ["serve", "--read-database", "replica.sqlite"],
        ["serve", "--metrics-token-file", "/nonexistent/token"], ["serve", "--jwt-role-claim", "r"], ["feed", "rewind"],
        ["feed", "restart", "--database", "/nonexistent/server.sqlite"],
    ])
    func badArgumentsGiveOneSentenceAndExitCode2(_ arguments: [String]) async throws {
        let station = try Workstation()
        try await station.login()
        let result = try await station.run(arguments)
        #expect(result.status == 2, "\(arguments): \(result.stderr)")
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1, "one sentence: \(result.stderr)")
        #expect(result.stderr.hasPrefix("error: "))
        #expect(!result.stderr.contains("Fatal") && !result.stderr.contains("Stack"))
    }

    @Test func helpForEveryCommand() async throws {
        let station = try Workstation()
        let overview = try await station.run(["help"])
        #expect(overview.status == 0)
        for command in ["serve", "token", "feed", "demo", "login", "add", "sync", "status", "logout", "simulate", "conflicts"] {
            #expect(overview.stdout.contains(command))
            let help = try await station.run([command, "--help"])
            #expect(help.status == 0)
            #expect(help.stdout.hasPrefix("Usage: outpost"), "\(command)")
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func theDemoPassesWithEveryInvariant() async throws {
        let station = try Workstation()
        let demo = try await station.run(["demo"])
        #expect(demo.status == 0, "\(demo.stderr)")
        func value(_ label: String) -> String? {
            demo.stdout.split(separator: "\n").first { $0.trimmingCharacters(in: .whitespaces).hasPrefix(label) }
                .map { $0.replacingOccurrences(of: label, with: "").trimmingCharacters(in: .whitespaces) }
        }
        #expect(value("duplicates") == "0")
        #expect(value("resurrected") == "0")
        #expect(value("violations") == "0")
        #expect(value("conflicts reported") == "1")
        #expect(value("invariants checked")?.hasPrefix("I1-I10") == true)
        #expect(Int(value("writes made on phones") ?? "") ?? 0 > 10)
        #expect(demo.stdout.contains("Every invariant held."))
    }

    /// Whether the push benchmark also runs with the device and the server
    /// on a core each: on Linux with two cores or more and util-linux's `taskset`.
    static var pushRunsOnACoreEach: Bool {
        #if os(Linux)
        return ProcessInfo.processInfo.activeProcessorCount >= 2 && FileManager.default.isExecutableFile(atPath: "/usr/bin/taskset")
        #else
        return false
        #endif
    }

    /// The benchmarks' smoke test: every benchmark runs and reports a figure
    /// and its baseline; timings are not asserted (they belong to `outpost bench`).
    @Test(.timeLimit(.minutes(3)))
    func benchQuickModeRunsEveryBenchmark() async throws {
        let station = try Workstation()
        let json = station.directory.path("bench.json")
        let result = try await station.run(["bench", "--quick", "--json", json])
        #expect(result.status == 0, "\(result.stderr)")
        for name in [
            "initial-sync", "initial-sync-encrypted", "initial-sync-mixed-keys", "local-write", "push", "push-end-to-end", "many-devices",
            "reconnect-storm-no-jitter",
            "reconnect-storm-jitter", "live-propagation-1", "live-propagation-20", "live-delivery-20", "live-propagation-among-20", "idle-connections-rss",
            "pull-p99-with-idle-connections", "attachments-upload", "attachments-upload-cut-every-5MB",
        ] + (Self.pushRunsOnACoreEach ? ["push-own-cores", "push-end-to-end-own-cores"] : []) {
            #expect(result.stdout.contains("\(name):"), "\(name) missing")
        }
        let data = try #require(FileManager.default.contents(atPath: json))
        let object = try JSONValue.parse(data).objectValue
        #expect(
            object?["results"].flatMap { if case .array(let items) = $0 { return items.count } else { return nil } }
                == (Self.pushRunsOnACoreEach ? 19 : 17))
    }

    /// The own-tables benchmark (PostgreSQL only) runs and reports each
    /// figure beside its floor; timings are not asserted.
    @Test(
        .enabled(if: ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES_URL"] != nil, "needs scripts/with-postgres"),
        .timeLimit(.minutes(3)))
    func benchOwnTablesQuickReportsEveryFigure() async throws {
        let station = try Workstation()
        let json = station.directory.path("bench.json")
        let postgres = ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES_URL"] ?? ""
        let result = try await station.run(["bench", "own-tables", "--quick", "--postgres", postgres, "--json", json])
        #expect(result.status == 0, "\(result.stderr)")
        let names = [
            "own-tables-push", "own-tables-backfill", "own-tables-download", "own-tables-backend-bulk", "own-tables-backend-to-device",
        ]
        for name in names { #expect(result.stdout.contains("\(name):"), "\(name) missing") }
        let data = try #require(FileManager.default.contents(atPath: json))
        guard case .array(let results)? = try JSONValue.parse(data).objectValue?["results"] else {
            Issue.record("no results in \(String(decoding: data, as: UTF8.self))")
            return
        }
        #expect(results.count == names.count)
    }

    /// The download of records whose uuids arrive in no key order (as from
    /// many devices) brings every record, beside the in-order one.
    @Test func benchMixedKeysDownloadsEveryRecord() async throws {
        let station = try Workstation()
        let json = station.directory.path("bench.json")
        let result = try await station.run(["bench", "initial-sync", "--quick", "--mixed-keys", "--json", json])
        #expect(result.status == 0, "\(result.stderr)")
        let data = try #require(FileManager.default.contents(atPath: json))
        guard case .array(let results)? = try JSONValue.parse(data).objectValue?["results"] else {
            Issue.record("no results in \(String(decoding: data, as: UTF8.self))")
            return
        }
        func records(_ name: String) -> Double? {
            let result = results.first { $0.objectValue?["name"]?.stringValue == name }?.objectValue
            switch result?["details"]?.objectValue?["records"] {
            case .int(let value)?: return Double(value)
            case .double(let value)?: return value
            default: return nil
            }
        }
        // The 5,000 people, and the catalogs every server seeds.
        #expect((records("initial-sync") ?? 0) > 5_000)
        #expect(records("initial-sync-mixed-keys") == records("initial-sync"), "every record of the mixed feed stored")
    }
}
