import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// `outpost serve --read-database`: pulls and live reads come from a
/// streaming replica (a hot standby made by the test with
/// `pg_basebackup -R`) while it keeps up, and from the primary while it lags
/// (replay paused with `pg_wal_replay_pause()`): no change is missed, none
/// comes twice, cursors never go back, and a live stream still gets every
/// commit at once.
@Suite(
    "Read replica",
    .enabled(if: Backend.postgresURL != nil, "needs scripts/with-postgres"),
    .timeLimit(.minutes(5))
)
struct ReadReplicaTests {
    /// A PostgreSQL primary of the test's own and a hot standby of it,
    /// stopped and removed on release. Not a standby of the shared test
    /// cluster: its base backup would copy every database the suite made
    /// before it (over 2 GB late in a full run, minutes on a loaded machine).
    final class ReplicatedCluster: Sendable {
        struct Failure: Error, CustomStringConvertible {
            var description: String
        }

        static let startLimit = Duration.seconds(180)
        let directory = "/tmp/outpost-replica-" + UUID().uuidString.prefix(8).lowercased()
        /// The primary's maintenance database, for `LiveServer(cluster:)`.
        let primaryURL: String
        let replicaPort: Int
        let startedIn: Duration
        let script = URL(fileURLWithPath: FileManager.default.currentDirectoryPath + "/scripts/pg-replica")

        init() throws {
            let started = ContinuousClock.now
            let pair = try ChildProcess.run(script, ["pair", directory], timeout: Self.startLimit)
            startedIn = ContinuousClock.now - started
            let ports = pair.stdout.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            guard pair.status == 0, ports.count == 2 else {
                _ = try? ChildProcess.run(script, ["stop", directory], timeout: .seconds(60))
                throw Failure(
                    description: "scripts/pg-replica pair exited \(pair.status) after \(startedIn) (bounded by \(Self.startLimit)) "
                        + "printing \(pair.stdout.debugDescription): \(pair.stderr)")
            }
            primaryURL = "postgres://postgres@127.0.0.1:\(ports[0])/postgres"
            replicaPort = ports[1]
        }

        deinit { _ = try? ChildProcess.run(script, ["stop", directory], timeout: .seconds(60)) }

        /// `location` (a database of the primary) on the replica.
        func location(of location: String) throws -> String {
            var components = try #require(URLComponents(string: location))
            components.port = replicaPort
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
        let replica = try await runBlocking { try ReplicatedCluster() }
        let primary = try LiveServer(.postgres, cluster: replica.primaryURL)
        let replicaLocation = try replica.location(of: primary.location)
        // The test database was made on the primary a moment ago: the standby
        // has replayed its creation before a server connects to it there.
        try await eventually("the replica has the test database") {
            try await runBlocking { (try? replica.run("SELECT 1", on: replicaLocation)) != nil }
        }
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

        /// Repeats `step` until it says done, for at most a minute: the
        /// replica's replay and the commit notices between the two servers
        /// can each take seconds on a loaded machine.
        func until(_ what: String, _ step: () async throws -> Bool) async throws {
            let limit = Duration.seconds(60)
            let deadline = ContinuousClock.now + limit
            while ContinuousClock.now < deadline {
                if try await step() { return }
                try await Task.sleep(for: .milliseconds(50))
            }
            throw WaitTimedOut(
                what, timeout: limit,
                detail: "\(seen.count) of \(pushed.count) records seen; pages from the replica \(served.server.metrics.pages(from: "replica")), "
                    + "from the primary \(served.server.metrics.pages(from: "primary"))")
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
        // A page may come short while another test's transaction on the
        // shared cluster holds the feed back past a pull's hold: read on.
        try await until("every commit while the replica lags, answered by the primary") {
            try await tail()
            return seen.count == 10
        }
        #expect(served.server.metrics.pages(from: "primary") > primaryPages)
        try await stream.wait("the stream got the commits made while the replica lags") { _ in
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
        // Done when every record arrived and a page came from the replica
        // again: a commit of the other server may reach this one's notice
        // (and the replica) after the replica served its first page.
        try await until("the replica caught up, serves again and every record arrived") {
            try await tail()
            return seen.count == pushed.count && served.server.metrics.pages(from: "replica") > before
        }
        print("ReadReplica: primary and replica started in \(replica.startedIn); \(pushed.count) records; pages from the replica \(served.server.metrics.pages(from: "replica")), from the primary while it lagged \(served.server.metrics.pages(from: "primary"))")
        #expect(seen == pushed, "every record exactly once at its version")
        // The stream's last events may still be on their way in a loaded run.
        let expected = pushed.count - 4
        try await stream.wait("the stream delivered \(expected) changes") { _ in try stream.changes().count >= expected }
        #expect(try stream.changes().count == expected)
        stream.close()
        // The clusters stop only after the servers on them are done.
        withExtendedLifetime((replica, primary, served)) {}
    }
}
