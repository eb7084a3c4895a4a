import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// The worked example in `Examples/OdoKeep`, run as its README says: the
/// app's schema (never written by Outpost) from `schema.sql` with `psql`,
/// `outpost serve --config outpost.json` with Outpost's tables in a schema of
/// their own, two devices of the command line capturing while the server is
/// away, and `backend.sh` writing to the same tables while they sync.
@Suite(
    "The OdoKeep example", .timeLimit(.minutes(4)),
    .enabled(if: Backend.postgresURL != nil, "needs scripts/with-postgres"))
struct OdoKeepExampleTests {
    static let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Examples/OdoKeep")
    static let van = "5d0e4a52-3c1b-4a8e-9f11-0a6b2c7d8e01"

    struct Device {
        let directory: TemporaryDirectory
        let profile: String

        func run(_ arguments: [String]) throws -> ChildProcess.Output {
            try ChildProcess.run(
                OutpostProcess.executable, arguments + ["--profile", profile],
                environment: ["XDG_CONFIG_HOME": directory.path("config"), "XDG_DATA_HOME": directory.path("data"), "NO_COLOR": "1"])
        }
    }

    static func psql(_ url: String, _ arguments: [String], environment: [String: String] = [:]) throws -> String {
        let result = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/psql"), [url, "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1"] + arguments)
        guard result.status == 0 else { throw OutpostProcess.ProcessFailure(status: result.status, stderr: result.stderr) }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func theExamplesTablesSyncBothWaysWhileItsBackendWrites() async throws {
        let directory = try TemporaryDirectory(prefix: "odokeep")
        let app = try Backend.makePostgresDatabase()
        _ = try Self.psql(app, ["-f", Self.example.appendingPathComponent("schema.sql").path])
        _ = try Self.psql(app, ["-c", "CREATE SCHEMA outpost"])
        let outpost = app + "?options=-csearch_path%3Doutpost"
        let config = Self.example.appendingPathComponent("outpost.json").path
        let token = try OutpostProcess.run(["token", "issue", "--database", outpost, "--user", "ana", "--role", "field", "--team", "north"])
            .split(separator: "\n").last.map(String.init) ?? ""

        var server = try OutpostProcess.serve(outpost, extra: ["--config", config])
        let phone = Device(directory: directory, profile: "phone")
        let tablet = Device(directory: directory, profile: "tablet")
        for device in [phone, tablet] {
            let login = try device.run(["login", "--server", server.base.absoluteString, "--token", token])
            #expect(login.status == 0, "\(login.stderr)")
            #expect(try device.run(["sync"]).status == 0)
        }
        // Rows the app had before Outpost came: Ana's van and her two fills, none of Bruno's.
        let listed = try tablet.run(["list", "fuel_logs"]).stdout
        #expect(listed.contains("7a1f9c30-6b2d-4e5f-8a9b-1c2d3e4f5a01") && listed.contains("7a1f9c30-6b2d-4e5f-8a9b-1c2d3e4f5a02"))
        #expect(!listed.contains("7a1f9c30-6b2d-4e5f-8a9b-1c2d3e4f5a03"), "Bruno's fill is not Ana's")

        // The server goes away; the phone captures at the pump, one fill breaking the table's CHECK.
        server.stop()
        var captured: [String] = []
        for liters in ["42.5", "38", "900"] {
            let added = try phone.run([
                "add", "fuel_logs", "vehicle_id=\(Self.van)", "liters:=\(liters)", "price_per_liter:=1.9", "note=at the pump",
            ])
            #expect(added.status == 0, "\(added.stderr)")
            captured.append(added.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        #expect(try phone.run(["sync"]).status != 0, "offline: the sync says so and keeps the captures")

        // The server is back; the backend writes while the devices sync.
        server = try OutpostProcess.serve(outpost, extra: ["--config", config], port: server.base.port ?? 0)
        defer { server.stop() }
        let backend = try SpawnedProcess(
            URL(fileURLWithPath: "/bin/bash"),
            [Self.example.appendingPathComponent("backend.sh").path, "--rounds", "3", "--sleep", "0.2"],
            environment: ["DATABASE_URL": app], stdout: .discard, stderr: .discard)
        let synced = try phone.run(["sync"])
        #expect(
            (synced.stdout + synced.stderr).contains("fuel_logs_liters_check"),
            "the refusal in the database's words: \(synced.stderr)\(synced.stdout)")
        try await backend.waitUntilExit(within: .seconds(60), "backend.sh")
        #expect(backend.terminationStatus == 0)
        _ = try phone.run(["sync"])

        // In the app's table exactly once, with the total its trigger computed; the refused fill not at all.
        let rows = try Self.psql(
            app, ["-c", "SELECT id || ' ' || total_cost FROM fuel_logs WHERE id IN ('\(captured[0])', '\(captured[1])', '\(captured[2])') ORDER BY total_cost"])
        #expect(rows.split(separator: "\n").map(String.init) == ["\(captured[1]) 72.20", "\(captured[0]) 80.75"])

        // The tablet receives the phone's captures with their totals and the backend's writes.
        var shown = ""
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            _ = try tablet.run(["sync"])
            shown = try tablet.run(["list", "fuel_logs", "--limit", "100"]).stdout
            if shown.contains(captured[0]) && shown.contains("fuel card import") && shown.contains("checked by the office") { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(shown.contains(captured[0]) && shown.contains(captured[1]), "\(shown)")
        #expect(shown.contains("fuel card import"), "the backend's import reached the tablet: \(shown)")
        #expect(shown.contains("checked by the office"), "the backend's note reached the tablet: \(shown)")
        #expect(!shown.contains(captured[2]), "the refused capture is the phone's alone")
        // Outpost's bookkeeping is in its own schema; the app's schema gained nothing but triggers.
        let added = try Self.psql(
            app, ["-c", "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relname IN ('records', 'own_table_pending')"])
        #expect(added == "0")
    }
}
