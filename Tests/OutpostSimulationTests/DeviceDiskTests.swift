import Foundation
import OutpostCore
import OutpostServer
import OutpostSQLite
import OutpostTesting
import Testing

/// The command line on a device whose disk misbehaves for real: a tiny
/// filesystem that fills up, one remounted read-only, a database file
/// truncated to nothing, a queued change damaged on disk.
@Suite("A device's disk, for real", .serialized, .timeLimit(.minutes(5)))
struct DeviceDiskTests {
    /// A small tmpfs of our own; needs the right to mount (root in this
    /// sandbox and in CI). Where mounting is refused the tests that need it
    /// are skipped, saying why.
    final class SmallFilesystem: @unchecked Sendable {
        // @unchecked Sendable: used from one test at a time.
        let directory: TemporaryDirectory
        let mountPoint: String

        init(megabytes: Int) throws {
            directory = try TemporaryDirectory(prefix: "outpost-disk")
            mountPoint = directory.path("mnt")
            try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
            try Self.mount(["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", mountPoint])
        }

        func remountReadOnly() throws { try Self.mount(["-o", "remount,ro", mountPoint]) }

        func unmount() { _ = try? ChildProcess.run(URL(fileURLWithPath: "/bin/umount"), [mountPoint]) }

        static func mount(_ arguments: [String]) throws {
            let result = try ChildProcess.run(URL(fileURLWithPath: "/bin/mount"), arguments)
            guard result.status == 0 else { throw MountRefused(reason: result.stderr) }
        }

        struct MountRefused: Error { var reason: String }

        static let canMount: Bool = {
            guard let probe = try? SmallFilesystem(megabytes: 1) else { return false }
            probe.unmount()
            return true
        }()
    }

    @Test(.enabled(if: SmallFilesystem.canMount, "needs permission to mount a tmpfs"))
    func aFullDiskStillListsAndShowsStatusAndAReadOnlyOneToo() async throws {
        let disk = try SmallFilesystem(megabytes: 2)
        defer { disk.unmount() }
        let station = try CommandLineTests.Workstation(dataHome: disk.mountPoint)
        try await station.login()
        station.stopServer()
        let notes = String(repeating: "n", count: 20_000)
        var added = 0
        var refusal: CommandLineTests.Result?
        while added < 500 {
            let result = try await station.run(["add", "people", "name=p\(added)", "notes=\(notes)"])
            if result.status != 0 {
                refusal = result
                break
            }
            added += 1
        }
        let refused = try #require(refusal, "the 2 MB filesystem filled up")
        #expect(refused.stderr.contains("storage is full"), "said plainly: \(refused.stderr)")
        #expect(added > 5)

        let list = try await station.run(["list", "people"])
        #expect(list.status == 0, "listing needs no write: \(list.stderr)")
        #expect(list.stdout.components(separatedBy: "\n").filter { $0.contains("people") }.count == added)
        let status = try await station.run(["status"])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains("Changes:      \(added) waiting"), "\(status.stdout)")

        try disk.remountReadOnly()
        let readOnlyList = try await station.run(["list", "people"])
        #expect(readOnlyList.status == 0, "a read-only filesystem still shows everything: \(readOnlyList.stderr)")
        #expect(readOnlyList.stdout.components(separatedBy: "\n").filter { $0.contains("people") }.count == added)
        #expect(try await station.run(["status"]).status == 0)
        let write = try await station.run(["add", "people", "name=late"])
        #expect(write.status == 1)
        #expect(write.stderr.contains("cannot be written"), "\(write.stderr)")
    }

    @Test func aDatabaseTruncatedToNothingIsSaidPlainlyAndForceStartsOver() async throws {
        let station = try CommandLineTests.Workstation()
        try await station.login()
        station.stopServer()
        for index in 0..<20 { #expect(try await station.run(["add", "people", "name=unsent \(index)"]).status == 0) }
        let database = station.dataHome + "/outpost/default/device.sqlite"
        try Data().write(to: URL(fileURLWithPath: database))
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database + suffix) }

        for command in [["list"], ["status"], ["add", "people", "name=after"]] {
            let result = try await station.run(command)
            #expect(result.status == 1, "\(command)")
            #expect(result.stderr.contains("missing or empty") && result.stderr.contains("unsent changes are gone"), "\(result.stderr)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: database)).isEmpty, "nothing was quietly replaced")
        #expect(try await station.run(["logout", "--force"]).status == 0)
    }

    @Test func aDamagedQueuedChangeLeavesListAndSyncWorking() async throws {
        let station = try CommandLineTests.Workstation()
        try await station.login()
        let good = try await station.run(["add", "people", "name=good"])
        let bad = try await station.run(["add", "people", "name=bad"])
        let badID = bad.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let database = station.dataHome + "/outpost/default/device.sqlite"
        let raw = try SQLiteConnection(path: database)
        _ = try raw.run("UPDATE outbox SET data = '{\"name\": ' WHERE record_uuid = ?", [.text(badID)])
        raw.close()

        let list = try await station.run(["list", "people"])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout.contains(good.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        let sync = try await station.run(["sync"])
        #expect(!sync.stderr.contains("the server's answer could not be read"), "a local fault is not the server's: \(sync.stderr)")
        #expect(sync.status == 0 && sync.stdout.contains("confirmed 2"), "\(sync.stdout) \(sync.stderr)")
        let uuids = try station.server.database.read { try $0.query("SELECT uuid FROM records WHERE collection = 'people'", []) }
            .map { $0.string(0) }
        #expect(Set(uuids) == [good.stdout.trimmingCharacters(in: .whitespacesAndNewlines), badID], "rebuilt from its record, nothing for a made-up uuid")
    }
}
