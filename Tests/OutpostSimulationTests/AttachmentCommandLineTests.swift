import Foundation
import OutpostCore
import OutpostServer
import OutpostSimulation
import OutpostTesting
import Testing

/// A field worker's photo through the `outpost` command line: attached to
/// a record, uploaded by a sync that is killed mid-upload, completed by the
/// next, and read by the coordinator.
@Suite("Attachments from the command line", .timeLimit(.minutes(5)))
struct AttachmentCommandLineTests {
    @Test func aPhotoWhoseSyncWasKilledMidUploadCompletesWithTheNextSync() async throws {
        let station = try CommandLineTests.Workstation()
        defer { station.stopServer() }
        // A slow uplink: the upload is still under way when the sync is killed
        // (16 s for the photo: a loaded machine once saw the first megabyte
        // only after all 8 had gone at 2 MB/s).
        let proxy = try ChaosProxy(upstreamPort: station.port, mode: .slowUpload(bytesPerSecond: 500_000))
        defer { proxy.stop() }
        let token = try station.server.tokens.issue(user: "ana", role: .field, team: "north", ttl: nil)
        let login = try await station.run(["login", "--server", proxy.url.absoluteString, "--token", token])
        try #require(login.status == 0, "\(login.stderr)")

        let added = try await station.run(["add", "people", "name=Romero"])
        let person = added.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let bytes = seededBytes(8_000_000, seed: 77)
        let file = station.directory.path("door.jpg")
        try bytes.write(to: URL(fileURLWithPath: file))
        let sha = SHA256.hex(of: bytes)
        let visit = try await station.run([
            "add", "visits", "person=\(person)", "visited_at=2026-11-29T10:00:00Z", "notes=front door", "photo=@\(file)",
        ])
        try #require(visit.status == 0, "\(visit.stderr)")
        let missing = try await station.run(["add", "visits", "person=\(person)", "photo=@\(station.directory.path("nope.jpg"))"])
        #expect(missing.status != 0 && missing.stderr.contains("no file"), "a missing file is refused: \(missing.stderr)")
        let waiting = try await station.run(["list", "visits"])
        #expect(waiting.stdout.contains("image/jpeg, 8000000 bytes") && waiting.stdout.contains("waiting to upload"), "\(waiting.stdout)")

        // The sync is killed once the server holds part of the photo.
        let sync = try SpawnedProcess(
            CommandLineTests.executable, ["sync", "--timeout", "120"],
            environment: ["XDG_CONFIG_HOME": station.directory.path("config"), "XDG_DATA_HOME": station.dataHome, "NO_COLOR": "1"])
        defer { sync.killIfRunning(after: .zero) }
        let received: @Sendable () throws -> Int64 = {
            try station.server.database.read { sql in
                try sql.first("SELECT received FROM blobs WHERE sha256 = ?", [.text(sha)]).map { Int64($0.int(0)) } ?? 0
            }
        }
        try await eventually("the server holds a part of the photo", timeout: .seconds(60)) { try received() > 1_000_000 }
        sync.signal(SIGKILL)
        try await sync.waitUntilExit(within: .seconds(10), "the killed sync")
        #expect(sync.wasKilledBySignal)
        let partial = try received()
        #expect(partial < 8_000_000, "killed mid-upload (the server held \(partial) bytes)")

        proxy.mode = .pass
        let second = try await station.run(["sync"])
        #expect(second.status == 0 && second.stdout.contains("attachments uploaded 1"), "\(second.stdout) \(second.stderr)")
        let stored = FileManager.default.contents(atPath: station.directory.path("server.sqlite.blobs/\(sha)"))
        #expect(stored == bytes, "the server holds exactly the photo")
        #expect(station.server.metrics.blobBytesReceivedTotal == 8_000_000, "no byte stored twice across the kill")
        let visits = try station.server.database.read { sql in
            try sql.query("SELECT data FROM records WHERE collection = 'visits'", []).compactMap { $0.optionalString(0) }
        }
        #expect(visits.count == 1 && visits[0].contains(sha), "the visit names its photo: \(visits)")
        let listed = try await station.run(["list", "visits"])
        #expect(listed.stdout.contains("on this device") && listed.stdout.contains("synced"), "\(listed.stdout)")

        // The coordinator, on another profile, reads the team's photo.
        let boss = try station.server.tokens.issue(user: "carla", role: .coordinator, team: "north", ttl: nil)
        _ = try await station.run(["login", "--profile", "boss", "--server", station.url, "--token", boss])
        _ = try await station.run(["sync", "--profile", "boss"])
        let out = station.directory.path("copy.jpg")
        let got = try await station.run(["get-blob", sha, "--profile", "boss", "--output", out])
        #expect(got.status == 0, "\(got.stderr)")
        #expect(FileManager.default.contents(atPath: out) == bytes)
        let bad = try await station.run(["get-blob", "not-a-hash", "--profile", "boss"])
        #expect(bad.status != 0 && bad.stderr.contains("64 hexadecimal digits"), "\(bad.stderr)")
        // The 12 digits `list` prints are enough.
        let short = station.directory.path("short.jpg")
        let byPrefix = try await station.run(["get-blob", String(sha.prefix(12)), "--profile", "boss", "--output", short])
        #expect(byPrefix.status == 0, "\(byPrefix.stderr)")
        #expect(FileManager.default.contents(atPath: short) == bytes)
        let unknown = try await station.run(["get-blob", "00000000", "--profile", "boss"])
        #expect(unknown.status != 0 && unknown.stderr.contains("No attachment on this computer starts with 00000000"), "\(unknown.stderr)")
    }
}
