import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// Several servers on one PostgreSQL write in parallel, with no common lock,
/// and the change feed still has no gap: a page stops below the oldest
/// transaction still running, so a write that started first and commits
/// last is never skipped by a cursor that moved past a later one.
@Suite(
    "Gap-free feed without a write lock",
    .enabled(if: Backend.postgresURL != nil, "needs scripts/with-postgres"),
    .timeLimit(.minutes(5))
)
struct GapFreeFeedTests {
    /// A server whose pulls answer at once with what is final, so the test
    /// sees the watermark itself rather than a pull waiting behind it.
    static func impatient(_ other: LiveServer) throws -> LiveServer {
        var config = other.server.config
        config.feedHoldWait = .zero
        return try LiveServer(sharing: other, config: config)
    }

    /// The premise and the rule, step by step: a push on A that started
    /// first holds its transaction open; a push on B starts later and
    /// commits first, with a higher version. A reader must not get B's
    /// record (its cursor would pass A's version), until A has ended.
    @Test(arguments: [true, false])
    func aWriteCommittedAboveARunningOneIsHeldBackUntilThatOneEnds(slowCommits: Bool) async throws {
        let serverA = try LiveServer(.postgres)
        let serverB = try Self.impatient(serverA)
        let slowToken = try serverA.token("slow")
        let fastToken = try serverA.token("fast")
        let reader = try serverA.token("admin-1", .admin)
        let inside = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        serverA.server.hooks.beforePushCommit = { user in
            guard user == "slow" else { return }
            inside.signal()
            // Bounded: a stuck test fails, it does not hang the run.
            _ = release.wait(timeout: .now() + 30)
            if !slowCommits { throw DatabaseError(kind: .transient, message: "the slow writer rolls back") }
        }
        let stream = try await EventReader(serverB, "/v1/stream?collections=people", token: reader)
        try await stream.wait("the stream on B is open") { !$0.isEmpty }

        let slowDevice = TestDevice()
        let slowBody = try WireCoding.encode(slowDevice.request(slowDevice.mutation(.create, data: ["name": "Slow"])))
        let portA = serverA.http.port
        let slow = Background { try RawHTTP.push(port: portA, token: slowToken, body: slowBody) }
        try await runBlocking { _ = inside.wait(timeout: .now() + 30) }

        let fastDevice = TestDevice()
        let fast = try await serverB.push(fastDevice.request(fastDevice.mutation(.create, data: ["name": "Fast"])), token: fastToken)
        let fastVersion = try #require(fast.results.first?.record?.version)

        let held = try await serverB.get("/v1/pull?collections=people", token: reader).decode(PullResponse.self)
        #expect(held.changes.isEmpty, "a committed change above a running transaction was handed out")
        try await Task.sleep(for: .milliseconds(100))
        #expect(try stream.changes().isEmpty, "the stream handed out a change above a running transaction")

        release.signal()
        let slowAnswer = try await runBlocking { try slow.value() }
        // Read on A, whose pulls wait for what is held back: other tests share
        // the cluster, and their transactions hold the watermark too.
        let after = try await serverA.pullAll(token: reader, cursor: held.cursor, query: "&collections=people")
        if slowCommits {
            #expect(slowAnswer.status == 200)
            let slowVersion = try #require(
                try WireCoding.decode(PushResponse.self, from: Data(slowAnswer.body)).results.first?.record?.version)
            #expect(slowVersion < fastVersion, "the slow writer's version is below the fast one's: it committed out of order")
            #expect(after.changes.compactMap(\.record).map(\.version) == [slowVersion, fastVersion])
        } else {
            #expect(slowAnswer.status == 503)
            #expect(after.changes.compactMap(\.record).map(\.version) == [fastVersion])
        }
        // A rollback announces nothing: the stream gets the change by reading
        // again while it is held back, not from a notification.
        try await stream.wait("the stream delivers what was held back", timeout: .seconds(30)) { _ in
            try stream.changes().count == (slowCommits ? 2 : 1)
        }
        #expect(try stream.changes().compactMap(\.record).last?.version == fastVersion)
        stream.close()
    }

    /// Transaction ids belong to the whole PostgreSQL cluster. A long
    /// transaction of another application, in another database of the same
    /// cluster, must not hold this feed back (devices would see nothing new
    /// for as long as it runs); one in this server's own database still does.
    ///
    /// Other tests write to their own databases of the same cluster at the
    /// same time. One of their transactions that was running when a pull's
    /// snapshot was taken, and ended before the pull read
    /// `pg_stat_activity`, cannot be told apart from one here and holds the
    /// page back for that one read (the rule is conservative on purpose; a
    /// waiting pull reads again). So the pulls that must see a record are
    /// repeated for a few seconds, while the transaction elsewhere stays open
    /// the whole time: if it held the feed back, every one would be short.
    @Test func aTransactionInAnotherDatabaseOfTheClusterDoesNotHoldTheFeedBack() async throws {
        let first = try LiveServer(.postgres)
        let server = try Self.impatient(first)
        let writer = try first.token("f-1")
        let reader = try first.token("admin-1", .admin)
        func connect(_ url: String) throws -> PostgresConnection {
            try PostgresConnection(url: url, redactedURL: "a test database", timeouts: .sharedTestDatabase, failureKind: .failure)
        }
        // Creating a table gives the transaction an id, as any write does.
        let elsewhere = try connect(try Backend.makePostgresDatabase())
        defer { elsewhere.rollback(); elsewhere.finish() }
        try elsewhere.command("BEGIN")
        try elsewhere.command("CREATE TABLE another_application (id integer)")

        /// The first page after `cursor` that holds the `expected` names, or
        /// the last one read when none did within five seconds.
        func pull(after cursor: PullCursor?, until expected: [String]) async throws -> PullResponse {
            let deadline = ContinuousClock.now + .seconds(5)
            while true {
                let target = "/v1/pull?collections=people" + (cursor.map { "&cursor=\($0.rawValue)" } ?? "")
                let page = try await server.get(target, token: reader).decode(PullResponse.self)
                let names = page.changes.compactMap(\.record).map { $0.data?["name"] }
                if names == expected.map({ .string($0) }) || ContinuousClock.now > deadline { return page }
                try await Task.sleep(for: .milliseconds(20))
            }
        }

        let device = TestDevice()
        _ = try await first.push(device.request(device.mutation(.create, data: ["name": "Ana"])), token: writer)
        let page = try await pull(after: nil, until: ["Ana"])
        #expect(page.changes.compactMap(\.record).map { $0.data?["name"] } == [.string("Ana")],
                "a transaction in another database held the feed back")

        let here = try connect(first.location)
        defer { here.finish() }
        try here.command("BEGIN")
        try here.command("CREATE TABLE held_here (id integer)")
        _ = try await first.push(device.request(device.mutation(.create, data: ["name": "Ben"])), token: writer)
        let held = try await server.get("/v1/pull?collections=people&cursor=\(page.cursor.rawValue)", token: reader)
            .decode(PullResponse.self)
        #expect(held.changes.isEmpty, "a change above a transaction running in the same database was handed out")
        here.rollback()
        let after = try await pull(after: page.cursor, until: ["Ben"])
        #expect(after.changes.compactMap(\.record).map { $0.data?["name"] } == [.string("Ben")])
    }

    /// A long poll woken by its own change, which committed above a
    /// transaction still running, finds it held back: it reads again in a
    /// moment and waits on, and answers with the change once that
    /// transaction ends, never empty before its wait ran out (it did, under
    /// load, when another test's transaction on the shared cluster held
    /// the page back past a plain pull's short hold).
    @Test func aLongPollWokenByAChangeHeldBackWaitsOnForIt() async throws {
        let live = try LiveServer(.postgres)
        let ana = try live.token("u-1")
        let (_, cursor) = try await live.pullAll(token: ana)
        let cursorText = try #require(cursor).rawValue
        let poll = Task { try await live.get("/v1/pull?cursor=\(cursorText)&wait=30", token: ana) }
        try await eventually("Ana's long poll is waiting") { live.server.liveConnections == 1 }

        let here = try PostgresConnection(url: live.location, redactedURL: "the test database", timeouts: .sharedTestDatabase, failureKind: .failure)
        defer { here.finish() }
        try here.command("BEGIN")
        try here.command("CREATE TABLE held_here (id integer)")
        let device = TestDevice()
        _ = try await live.push(device.request(device.mutation(.create, data: ["name": "Ana's"])), token: ana)
        // Longer than a pull's hold (250 ms), with many reads again meanwhile.
        try await Task.sleep(for: .seconds(1))
        #expect(live.server.liveConnections == 1, "still waiting while its change is held back, not answered empty")
        here.rollback()

        let answer = try await poll.value(within: .seconds(20), "the long poll answered once the transaction ended")
        #expect(answer.status == 200)
        let page = try answer.decode(PullResponse.self)
        #expect(page.changes.map { $0.record?.data?["name"] } == [JSONValue.string("Ana's")])
    }

    /// Three servers, writers committing out of order (long and short
    /// transactions, some rolled back, coordinators editing each other's
    /// records), and a reader tailing each server in small pages.
    @Test func threeServersManyWritersOutOfOrderAndTailingReadersSeeEveryChange() async throws {
        let first = try LiveServer(.postgres)
        let servers = [first, try Self.impatient(first), try Self.impatient(first)]
        let seeds = Locked(UInt64(20_261_201))
        for server in servers {
            server.server.hooks.beforePushCommit = { _ in
                let roll = seeds.withLock { seed -> UInt64 in
                    seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                    return seed >> 33
                }
                // One in eight rolls back; one in four holds its transaction 5-40 ms.
                if roll % 8 == 0 { throw DatabaseError(kind: .transient, message: "injected rollback") }
                if roll % 4 == 1 { usleep(UInt32(5_000 + roll % 35_000)) }
            }
        }
        let fieldWriters = try (0..<6).map { try first.token("f-\($0)", team: "t-1") }
        let coordinators = try (0..<2).map { try first.token("c-\($0)", .coordinator, team: "t-1") }
        let admin = try first.token("admin-1", .admin)
        let committed = Locked<[UUID: Set<Int64>]>([:])
        let created = Locked<[UUID]>([])
        let done = ManagedFlag()
        let rollbacks = Locked(0)

        /// Sends a push until it is answered 200 (a rollback answers 503 and
        /// the device resends the same mutations), and records what applied.
        @Sendable func deliver(_ request: PushRequest, token: String, via server: LiveServer) async throws -> PushResponse {
            for _ in 0..<50 {
                let response = try await server.send("POST", "/v1/push", token: token, body: try WireCoding.encode(request))
                if response.status == 503 {
                    rollbacks.withLock { $0 += 1 }
                    continue
                }
                let answer = try response.decode(PushResponse.self)
                committed.withLock { committed in
                    for result in answer.results where result.status == .applied {
                        if let record = result.record { committed[record.uuid, default: []].insert(record.version) }
                    }
                }
                return answer
            }
            throw WaitTimedOut("a push answered 200 within 50 attempts", timeout: .seconds(0))
        }

        let writers = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, token) in fieldWriters.enumerated() {
                    group.addTask {
                        let device = TestDevice()
                        for round in 0..<25 {
                            let batch = (0..<(1 + (index + round) % 5)).map { item in
                                device.mutation(.create, data: ["name": .string("F\(index)-\(round)-\(item)")])
                            }
                            _ = try await deliver(
                                PushRequest(clientID: device.clientID, mutations: batch), token: token,
                                via: servers[(index + round) % servers.count])
                            created.withLock { $0 += batch.map(\.uuid) }
                        }
                    }
                }
                for (index, token) in coordinators.enumerated() {
                    group.addTask {
                        let device = TestDevice()
                        for round in 0..<40 {
                            let known = created.current
                            guard !known.isEmpty else {
                                try await Task.sleep(for: .milliseconds(5))
                                continue
                            }
                            // Both coordinators edit the same records: row locks and
                            // transactions that meet a newer version take turns.
                            let target = known[(round * 7) % known.count]
                            _ = try await deliver(
                                device.request(device.mutation(.update, uuid: target, data: ["section": .int(Int64(round))])),
                                token: token, via: servers[(index + round) % servers.count])
                        }
                    }
                }
                try await group.waitForAll()
            }
            done.set()
        }

        struct Tail {
            var latest: [UUID: Int64] = [:]
            var seen: [(UUID, Int64)] = []
            var pages = 0
            var problems: [String] = []
        }
        let readers = servers.map { server in
            Task { () throws -> Tail in
                var tail = Tail()
                var cursor: PullCursor?
                var position: Int64 = -1
                while true {
                    let finished = done.isSet
                    while true {
                        var target = "/v1/pull?collections=people&limit=7"
                        if let cursor { target += "&cursor=\(cursor.rawValue)" }
                        let page = try await server.get(target, token: admin).decode(PullResponse.self)
                        tail.pages += 1
                        let versions = page.changes.compactMap(\.record).map(\.version)
                        if Set(page.changes.map(\.uuid)).count != page.changes.count {
                            tail.problems.append("a record twice in one page")
                        }
                        if versions != versions.sorted() || versions.first.map({ $0 <= position }) == true {
                            tail.problems.append("versions out of order or behind the cursor: \(versions) after \(position)")
                        }
                        let next = try Self.version(of: page.cursor)
                        if next < position { tail.problems.append("the cursor went back from \(position) to \(next)") }
                        position = max(position, next)
                        cursor = page.cursor
                        for record in page.changes.compactMap(\.record) {
                            tail.latest[record.uuid] = record.version
                            tail.seen.append((record.uuid, record.version))
                        }
                        if !page.hasMore { break }
                    }
                    if finished { return tail }
                    try await Task.sleep(for: .milliseconds(3))
                }
            }
        }
        try await writers.value(within: .seconds(240), "the writers finished")
        var tails: [Tail] = []
        for reader in readers { tails.append(try await reader.value(within: .seconds(60), "a reader caught up")) }

        let final = try first.database.read { sql in
            try sql.query("SELECT uuid, version FROM records WHERE collection = 'people'", []).reduce(into: [UUID: Int64]()) {
                $0[UUID(uuidString: $1.string(0))!] = $1.int(1)
            }
        }
        let allCommitted = committed.current
        #expect(final.count == created.current.count, "every create stored once")
        #expect(rollbacks.current > 0, "the run rolled some transactions back")
        for (index, tail) in tails.enumerated() {
            #expect(tail.problems.isEmpty, "reader on server \(index): \(tail.problems.prefix(5))")
            let missed = final.filter { tail.latest[$0.key] != $0.value }.count
            #expect(missed == 0 && tail.latest.count == final.count, "reader on server \(index) missed \(missed) of \(final.count) records' last versions")
            let unknown = tail.seen.filter { allCommitted[$0.0]?.contains($0.1) != true }
            #expect(unknown.isEmpty, "reader on server \(index) saw versions no push applied: \(unknown.prefix(3))")
        }
        print("GapFreeFeed: \(final.count) records, \(allCommitted.values.reduce(0) { $0 + $1.count }) applied versions, \(rollbacks.current) rolled-back pushes, pages read \(tails.map(\.pages))")
    }

    /// The same across real processes, SIGKILLed mid-push: three `outpost
    /// serve` on one PostgreSQL, one of them killed and restarted every few
    /// hundred milliseconds while devices push batches to any of them and
    /// resend, as the library does, when an answer is lost. Nothing is lost,
    /// nothing applies twice, and a reader tailing whichever server is up
    /// ends with exactly the database's records.
    @Test func serversKilledMidPushLoseNothingAndTheFeedHasNoGap() async throws {
        let directory = try TemporaryDirectory()
        let (database, location) = try Backend.postgres.makeDatabase(in: directory)
        defer { database.close() }
        func issue(_ user: String, _ role: String) async throws -> String {
            try await runBlocking {
                try OutpostProcess.run(["token", "issue", "--database", location, "--user", user, "--role", role, "--team", "t-1"])
            }.split(separator: "\n").last.map(String.init) ?? ""
        }
        var tokens: [String] = []
        for index in 0..<4 { tokens.append(try await issue("f-\(index)", "field")) }
        let admin = try await issue("admin-1", "admin")
        let pool = Locked<[RunningServer]>([])
        for _ in 0..<3 {
            let server = try await runBlocking { try OutpostProcess.serve(location) }
            pool.withLock { $0.append(server) }
        }
        defer { for server in pool.current { server.stop() } }
        let done = ManagedFlag()
        let lostAnswers = Locked(0)
        let kills = Locked(0)

        /// Any server that is up now (the one at `index` modulo the pool).
        @Sendable func server(_ index: Int) -> RunningServer {
            pool.withLock { $0[index % $0.count] }
        }

        let killer = Task {
            var round = 0
            while !done.isSet {
                try await Task.sleep(for: .milliseconds(150 + (round * 37) % 200))
                let victim = pool.withLock { $0.remove(at: round % $0.count) }
                victim.process.signal(SIGKILL)
                victim.process.waitUntilExit()
                kills.withLock { $0 += 1 }
                let replacement = try await runBlocking { try OutpostProcess.serve(location) }
                pool.withLock { $0.append(replacement) }
                round += 1
            }
        }

        let writers = Task {
            try await withThrowingTaskGroup(of: [UUID].self) { group in
                for (index, token) in tokens.enumerated() {
                    group.addTask {
                        let device = TestDevice()
                        var uuids: [UUID] = []
                        for round in 0..<12 {
                            let batch = (0..<25).map { item in
                                device.mutation(.create, data: ["name": .string("W\(index)-\(round)-\(item)")])
                            }
                            let request = PushRequest(clientID: device.clientID, mutations: batch)
                            var attempt = 0
                            while true {
                                attempt += 1
                                do {
                                    let answer = try await server(index + round + attempt).push(request, token: token)
                                    #expect(answer.results.allSatisfy { $0.status == .applied || $0.status == .duplicate })
                                    break
                                } catch {
                                    // The server died with the push in flight (or
                                    // answered 503): send the same mutations again.
                                    lostAnswers.withLock { $0 += 1 }
                                    guard attempt < 100 else { throw error }
                                    try await Task.sleep(for: .milliseconds(20))
                                }
                            }
                            uuids += batch.map(\.uuid)
                        }
                        return uuids
                    }
                }
                var all: [UUID] = []
                for try await uuids in group { all += uuids }
                return all
            }
        }

        let reader = Task { () throws -> [UUID: Int64] in
            var latest: [UUID: Int64] = [:]
            var cursor: String?
            var position: Int64 = -1
            var index = 0
            while true {
                let finished = done.isSet
                while true {
                    index += 1
                    let page: PullResponse
                    do {
                        page = try await server(index).pull(cursor: cursor, token: admin, limit: 25)
                    } catch {
                        try await Task.sleep(for: .milliseconds(20))
                        continue
                    }
                    let next = try Self.version(of: page.cursor)
                    #expect(next >= position, "the cursor went back")
                    #expect(page.changes.compactMap(\.record).allSatisfy { $0.version > position })
                    position = max(position, next)
                    cursor = page.cursor.rawValue
                    for record in page.changes.compactMap(\.record) { latest[record.uuid] = record.version }
                    if !page.hasMore { break }
                }
                if finished { return latest }
                try await Task.sleep(for: .milliseconds(10))
            }
        }

        let written = try await writers.value(within: .seconds(240), "the writers finished through the kills")
        done.set()
        try await killer.value(within: .seconds(60), "the killer stopped")
        let seen = try await reader.value(within: .seconds(60), "the reader caught up")
        let stored = try database.read { sql in
            try sql.query("SELECT uuid, version FROM records WHERE collection = 'people'", []).reduce(into: [UUID: Int64]()) {
                $0[UUID(uuidString: $1.string(0))!] = $1.int(1)
            }
        }
        print("GapFreeFeed (SIGKILL): \(written.count) creates, \(kills.current) servers killed, \(lostAnswers.current) answers lost and resent")
        #expect(kills.current >= 3)
        #expect(stored.count == written.count, "each create stored exactly once")
        #expect(Set(stored.keys) == Set(written))
        let missed = stored.filter { seen[$0.key] != $0.value }.count
        #expect(missed == 0 && seen.count == stored.count, "the reader missed \(missed) of \(stored.count) records")
    }

    /// The version a cursor stands at (cursors are opaque to clients; the
    /// test reads the server's own format to check they never go back).
    static func version(of cursor: PullCursor) throws -> Int64 {
        var base64 = cursor.rawValue.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        let text = try #require(Data(base64Encoded: base64).map { String(decoding: $0, as: UTF8.self) })
        return try #require(text.split(separator: ".").dropFirst().first.flatMap { Int64($0) })
    }
}
