import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// `outpost serve --read-database`: pulls and live reads come from a
/// streaming replica (a second cluster made by the test with
/// `pg_basebackup -R`) while it keeps up, and from the primary while it lags
/// (replay paused with `pg_wal_replay_pause()`): no change is missed, none
/// comes twice, cursors never go back, and a live stream still gets every
/// commit at once.
@Suite(
    "Read replica",
    .enabled(if: Backend.postgresURL != nil, "needs scripts/with-postgres"),
    .timeLimit(.minutes(4))
)
struct ReadReplicaTests {
    /// A hot standby of the test cluster, stopped and removed on release.
    final class Replica: Sendable {
        let directory = "/tmp/outpost-replica-" + UUID().uuidString.prefix(8).lowercased()
        let port: Int
        let script = URL(fileURLWithPath: FileManager.default.currentDirectoryPath + "/scripts/pg-replica")

        init() throws {
            guard let url = Backend.postgresURL, let primary = URLComponents(string: url)?.port else {
                throw WaitTimedOut("the test cluster's port", timeout: .zero)
            }
            let started = try ChildProcess.run(script, ["start", String(primary), directory], timeout: .seconds(120))
            guard started.status == 0, let port = Int(started.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw WaitTimedOut("the replica started", timeout: .seconds(120), detail: started.stderr)
            }
            self.port = port
        }

        deinit { _ = try? ChildProcess.run(script, ["stop", directory]) }

        /// `location` (a database of the primary) on the replica.
        func location(of location: String) throws -> String {
            var components = try #require(URLComponents(string: location))
            components.port = port
            return try #require(components.string)
        }

        func run(_ sql: String, on location: String) throws {
            let connection = try PostgresConnection(
                url: location, redactedURL: "the replica", timeouts: .sharedTestDatabase, failureKind: .failure)
            defer { connection.finish() }
            try connection.command(sql)
        }
    }

    @Test func pullsAndStreamsStayCompleteWhileTheReplicaLagsAndComeFromItWhenItKeepsUp() async throws {
        let primary = try LiveServer(.postgres)
        let replica = try await runBlocking { try Replica() }
        let replicaLocation = try replica.location(of: primary.location)
        let served = try LiveServer(sharing: primary, readLocation: replicaLocation)
        let admin = try primary.token("admin-1", .admin)
        let writer = try primary.token("f-1")
        let device = TestDevice()
        var pushed: [UUID: Int64] = [:]
        func push(_ count: Int, via server: LiveServer) async throws {
            let mutations = (0..<count).map { _ in device.mutation(.create, data: ["name": "Person"]) }
            let answer = try await server.push(PushRequest(clientID: device.clientID, mutations: mutations), token: writer)
            for result in answer.results { if let record = result.record { pushed[record.uuid] = record.version } }
        }

        var seen: [UUID: Int64] = [:]
        var cursor: PullCursor?
        var position: Int64 = -1
        /// Pulls to the end on the replica-reading server, checking order and cursors.
        func tail() async throws {
            let page = try await served.pullAll(token: admin, cursor: cursor, limit: 3, query: "&collections=people")
            for change in page.changes {
                guard let record = change.record else { continue }
                #expect(record.version > position, "a change at or behind the cursor")
                #expect(seen[record.uuid] == nil, "a record came twice")
                seen[record.uuid] = record.version
            }
            if let next = page.cursor {
                let version = try GapFreeFeedTests.version(of: next)
                #expect(version >= position, "the cursor went back")
                position = max(position, version)
                cursor = next
            }
        }

        /// Repeats `step` until it says done, for at most 30 s.
        func until(_ what: String, _ step: () async throws -> Bool) async throws {
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline {
                if try await step() { return }
                try await Task.sleep(for: .milliseconds(50))
            }
            throw WaitTimedOut(what, timeout: .seconds(30))
        }

        // Keeping up: pages come from the replica.
        try await push(4, via: served)
        let replicaPages = served.server.metrics.pages(from: "replica")
        try await until("the replica served a page with the first records") {
            try await tail()
            return seen.count == 4 && served.server.metrics.pages(from: "replica") > replicaPages
        }

        // Lagging: replay paused, writes go on here and on another server.
        try replica.run("SELECT pg_wal_replay_pause()", on: replicaLocation)
        let stream = try await EventReader(served, "/v1/stream?collections=people&cursor=\(cursor!.rawValue)", token: admin)
        try await stream.wait("the stream is open") { !$0.isEmpty }
        let primaryPages = served.server.metrics.pages(from: "primary")
        try await push(3, via: served)
        try await push(3, via: primary)
        try await tail()
        #expect(seen.count == 10, "every commit while the replica lags, answered by the primary")
        #expect(served.server.metrics.pages(from: "primary") > primaryPages)
        try await stream.wait("the stream got the commits made while the replica lags", timeout: .seconds(30)) { _ in
            try stream.changes().count == 6
        }

        // Writers and pauses interleaved, then the replica resumes and catches up.
        for round in 0..<6 {
            try replica.run(round % 2 == 0 ? "SELECT pg_wal_replay_resume()" : "SELECT pg_wal_replay_pause()", on: replicaLocation)
            try await push(2, via: round % 2 == 0 ? served : primary)
            try await tail()
        }
        try replica.run("SELECT pg_wal_replay_resume()", on: replicaLocation)
        let before = served.server.metrics.pages(from: "replica")
        try await until("the replica caught up and serves again") {
            try await tail()
            return served.server.metrics.pages(from: "replica") > before
        }
        print("ReadReplica: \(pushed.count) records; pages from the replica \(served.server.metrics.pages(from: "replica")), from the primary while it lagged \(served.server.metrics.pages(from: "primary"))")
        #expect(seen == pushed, "every record exactly once at its version")
        // The stream's last events may still be on their way in a loaded run.
        let expected = pushed.count - 4
        try await stream.wait("the stream delivered \(expected) changes") { _ in try stream.changes().count >= expected }
        #expect(try stream.changes().count == expected)
        stream.close()
    }
}
