import Foundation
import Outpost
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// A live stream read as the library reads it: events as they arrive.
final class EventReader: @unchecked Sendable {
    // @unchecked Sendable: `events` is only touched through `Locked`.
    let status: Int
    let headers: [String: String]
    private let events = Locked<[ServerEvent]>([])
    private let ended = Locked<Bool>(false)
    private let reader: Task<Void, Never>

    private let transport: URLSessionTransport

    init(_ live: LiveServer, _ target: String, token: String?) async throws {
        transport = URLSessionTransport(baseURL: live.base)
        let stream = try await transport.openStream(
            TransportRequest(
                method: "GET", target: target, headers: token.map { ["Authorization": "Bearer \($0)"] } ?? [:], timeout: 10))
        status = stream.status
        headers = stream.headers
        let events = self.events
        let ended = self.ended
        reader = Task {
            var parser = ServerEventParser()
            do {
                for try await chunk in stream.bytes {
                    let parsed = parser.feed(chunk)
                    events.withLock { $0 += parsed }
                }
            } catch {}
            ended.withLock { $0 = true }
        }
    }

    deinit { reader.cancel() }

    var all: [ServerEvent] { events.current }
    var isEnded: Bool { ended.current }

    func changes() throws -> [PullChange] {
        try all.filter { $0.name == "changes" }.flatMap { try WireCoding.decode(PullResponse.self, from: $0.data).changes }
    }

    /// Waits (bounded) until `condition` holds over the events so far.
    /// The default bound allows for a full run's slow start (see `waitUntilServing`).
    func wait(_ what: String, timeout: Duration = .seconds(60), _ condition: @Sendable ([ServerEvent]) throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try condition(all) { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw WaitTimedOut(what, timeout: timeout)
    }

    func close() { reader.cancel() }
}

extension PullChange {
    var record: WireRecord? {
        if case .record(let record) = self { return record }
        return nil
    }
}


/// `GET /v1/pull?wait=` and `GET /v1/stream` against a real socket: answers
/// come the moment a change in the caller's scope commits, never another
/// person's, and streams end plainly on revocation and shutdown.
@Suite("Live endpoints", .timeLimit(.minutes(3)))
struct LiveEndpointTests {
    static func config(heartbeat: Int = 15) throws -> ServerConfig {
        var config = try ServerConfig()
        config.heartbeatSeconds = heartbeat
        return config
    }

    func person(_ device: TestDevice, _ name: String) -> PushRequest {
        device.request(device.mutation(.create, data: ["name": .string(name)]))
    }

    @Test(arguments: Backend.available)
    func aLongPollAnswersWhenAChangeInItsScopeCommitsAndNotBefore(backend: Backend) async throws {
        let live = try LiveServer(backend, config: try Self.config())
        let ana = try live.token("u-1")
        let bea = try live.token("u-2")
        let (_, cursor) = try await live.pullAll(token: ana)
        let cursorText = try #require(cursor).rawValue
        let started = ContinuousClock.now
        // The wait is far longer than the answer may take: a pull woken by a
        // commit may still wait, on PostgreSQL, for transactions other tests
        // hold open on the shared cluster (up to the feed hold, 20 s here).
        let poll = Task { try await live.get("/v1/pull?cursor=\(cursorText)&wait=60", token: ana) }
        try await Task.sleep(for: .milliseconds(300))
        // Another field user's write is not Ana's business: it must not answer her.
        _ = try await live.push(person(TestDevice(), "Bea's own"), token: bea)
        try await Task.sleep(for: .milliseconds(400))
        #expect(live.server.liveConnections == 1, "still waiting after someone else's commit")
        _ = try await live.push(person(TestDevice(), "Ana's"), token: ana)
        let answer = try await poll.value(within: .seconds(40), "the long poll answered after Ana's commit")
        #expect(ContinuousClock.now - started < .seconds(50), "answered by the commit, before its 60 s wait ran out")
        #expect(answer.status == 200)
        let page = try answer.decode(PullResponse.self)
        #expect(page.changes.map { $0.record?.data?["name"] } == [JSONValue.string("Ana's")])
        #expect(live.server.liveConnections == 0)

        // Nothing new: the wait runs out and the same cursor comes back.
        let empty = try await live.get("/v1/pull?cursor=\(page.cursor.rawValue)&wait=1", token: ana)
        #expect(empty.status == 200)
        let emptyPage = try empty.decode(PullResponse.self)
        #expect(emptyPage.changes.isEmpty && emptyPage.cursor == page.cursor)
    }

    @Test(arguments: Backend.available)
    func aStreamCarriesTheScopeInOrderAndNothingElse(backend: Backend) async throws {
        let live = try LiveServer(backend, config: try Self.config())
        let ana = try live.token("u-1")
        let bea = try live.token("u-2")
        let coordinator = try live.token("c-1", .coordinator)
        _ = try await live.push(person(TestDevice(), "before"), token: ana)
        let anaStream = try await EventReader(live, "/v1/stream?collections=people", token: ana)
        #expect(anaStream.status == 200)
        #expect(anaStream.headers["content-type"] == "text/event-stream")
        #expect(anaStream.headers["x-accel-buffering"] == "no")
        let teamStream = try await EventReader(live, "/v1/stream?collections=people", token: coordinator)
        try await anaStream.wait("the backlog after no cursor") { _ in try anaStream.changes().count == 1 }
        #expect(anaStream.all.first?.name == "heartbeat", "a heartbeat first: the stream is open")

        let device = TestDevice()
        for name in ["one", "two", "three"] { _ = try await live.push(person(device, name), token: ana) }
        _ = try await live.push(person(TestDevice(), "Bea's"), token: bea)
        try await anaStream.wait("Ana's three new records") { _ in try anaStream.changes().count == 4 }
        try await teamStream.wait("the team's five") { _ in try teamStream.changes().count == 5 }
        let names = try anaStream.changes().compactMap { $0.record?.data?["name"]?.stringValue }
        #expect(names == ["before", "one", "two", "three"], "commit order, and never another field user's record")
        let versions = try teamStream.changes().compactMap { $0.record?.version }
        #expect(versions == versions.sorted())

        // Two coordinators of one team share the pages a commit wakes them
        // for; each gets a cursor of its own scope, so the next events come too.
        let second = try live.token("c-2", .coordinator)
        let secondStream = try await EventReader(live, "/v1/stream?collections=people", token: second)
        try await secondStream.wait("the second coordinator's backlog") { _ in try secondStream.changes().count == 5 }
        for round in 0..<3 {
            _ = try await live.push(person(device, "shared \(round)"), token: ana)
            try await teamStream.wait("the first coordinator has round \(round)") { _ in try teamStream.changes().count == 6 + round }
            try await secondStream.wait("the second has it too") { _ in try secondStream.changes().count == 6 + round }
        }
        #expect(!secondStream.all.contains { $0.name == "error" }, "each stream's cursor is its own scope's")
        #expect(!teamStream.all.contains { $0.name == "error" })
    }

    @Test(arguments: Backend.available)
    func aRecordLeavingTheScopeIsRemovedOnTheLiveChannelToo(backend: Backend) async throws {
        let live = try LiveServer(backend, config: try Self.config())
        let ana = try live.token("u-1", team: "t-1")
        let bea = try live.token("u-2", team: "t-2")
        let admin = try live.token("a-1", .admin, team: "hq")
        let device = TestDevice()
        let uuid = UUID()
        _ = try await live.push(device.request(device.mutation(.create, uuid: uuid, data: ["name": "Ana's"])), token: ana)
        let anaStream = try await EventReader(live, "/v1/stream?collections=people", token: ana)
        let beaStream = try await EventReader(live, "/v1/stream?collections=people", token: bea)
        try await anaStream.wait("Ana has her record") { _ in try anaStream.changes().count == 1 }
        try await beaStream.wait("Bea's stream is open") { !$0.isEmpty }
        let moved = try await live.send(
            "POST", "/v1/records/people/\(uuid.wireText)/assign", token: admin,
            body: Data(#"{"owner": "u-2", "team": "t-2"}"#.utf8))
        #expect(moved.status == 200, "\(moved.text)")
        try await anaStream.wait("the record left Ana's scope on her stream") { _ in
            try anaStream.changes().contains { if case .removed(_, let removed) = $0 { return removed == uuid } else { return false } }
        }
        try await beaStream.wait("and joined Bea's") { _ in try beaStream.changes().contains { $0.uuid == uuid } }
    }

    @Test(arguments: Backend.available)
    func aRevokedTokenEndsItsStreamAtOnce(backend: Backend) async throws {
        // Heartbeats two minutes apart: a revocation noticed only at the next
        // one would take that long, whatever the load on the machine.
        let live = try LiveServer(backend, config: try Self.config(heartbeat: 120))
        let ana = try live.token("u-1")
        let stream = try await EventReader(live, "/v1/stream", token: ana)
        try await stream.wait("the first heartbeat") { !$0.isEmpty }
        let revokedAt = ContinuousClock.now
        try live.server.tokens.revoke(ana)
        try await stream.wait("the error event") { $0.contains { $0.name == "error" } }
        // Alone this takes 0.3 s; in a full run, with every suite busy, it
        // has taken up to 14.3 s on a slow machine. The bound tells it from
        // the next heartbeat (120 s).
        #expect(ContinuousClock.now - revokedAt < .seconds(60), "within the revocation watch's second, not a heartbeat later")
        let error = try #require(stream.all.last { $0.name == "error" })
        #expect(try WireCoding.decode(ErrorBody.self, from: error.data).code == .tokenRevoked)
        try await eventually("the server closed the stream") { stream.isEnded }
    }

    @Test(.enabled(if: Backend.postgresURL != nil, "needs the test PostgreSQL"))
    func aCommitOnOneServerWakesStreamsAndLongPollsOnAnother() async throws {
        // Heartbeats and waits far longer than the test: only a notification can wake B in time.
        let serverA = try LiveServer(.postgres, config: try Self.config(heartbeat: 120))
        let serverB = try LiveServer(sharing: serverA)
        let ana = try serverA.token("u-1")
        let coordinator = try serverA.token("c-1", .coordinator)
        let onB = try await EventReader(serverB, "/v1/stream?collections=people", token: coordinator)
        try await onB.wait("the stream on B is open") { !$0.isEmpty }
        let cursor = try #require(try await serverB.pullAll(token: ana).cursor).rawValue
        let poll = Task { try await serverB.get("/v1/pull?cursor=\(cursor)&wait=60&collections=people", token: ana) }
        try await eventually("B's long poll waits") { serverB.server.liveConnections == 2 }
        let pushed = ContinuousClock.now
        _ = try await serverA.push(person(TestDevice(), "Pushed on A"), token: ana)
        try await onB.wait("the push on A reached the stream on B", timeout: .seconds(50)) { _ in try onB.changes().count == 1 }
        let answer = try await poll.value(within: .seconds(50), "B's long poll answered after A's commit")
        #expect(ContinuousClock.now - pushed < .seconds(55), "by notification, not by a heartbeat or the wait running out")
        #expect(try answer.decode(PullResponse.self).changes.count == 1)
    }

    /// A commit made before this server's first `LISTEN` is never
    /// notified to it: once listening, it wakes every connection, as after
    /// a lost connection, so a stream opened meanwhile reads the change.
    @Test(.enabled(if: Backend.postgresURL != nil, "needs the test PostgreSQL"))
    func aServerWakesEveryConnectionOnceItStartsListening() async throws {
        let url = try #require(Backend.postgresURL)
        let heard = Locked<[String]>([])
        let listener = PostgresCommitListener(url: url, redactedURL: "test", log: { _ in }) { payload in
            heard.withLock { $0.append(payload) }
        }
        defer { listener.stop() }
        try await eventually("the listener's first word, with no commit made") { !heard.current.isEmpty }
        #expect(heard.current == [PostgresCommitListener.everything])
    }

    @Test func aPageIsSharedUntilTheNextCommitAndNeverAcrossIt() throws {
        let hub = LiveHub()
        var reads = 0
        func page(_ key: String) -> (PullService.Page, Bool) {
            let (event, shared) = hub.sharedPage(key) {
                reads += 1
                return ChangesEvent(
                    page: PullService.Page(body: [], changesRange: 0..<0, cursor: "c\(reads)", hasMore: false, changes: 0, lastVersion: 0),
                    after: nil)
            }
            return (event.page, shared)
        }
        #expect(page("team:t-1|people|||7").1 == false)
        #expect(page("team:t-1|people|||7").1 == true, "the same scope and position read again: shared")
        #expect(page("team:t-2|people|||7").1 == false, "another scope reads for itself")
        hub.committed(CommitNotice(collections: ["people"], owners: ["u-1"], teams: ["t-1"]))
        let afterCommit = page("team:t-1|people|||7")
        #expect(afterCommit.1 == false && afterCommit.0.cursor == "c3", "a commit ends every shared page")
        #expect(reads == 3 && hub.sharedPageHits == 1)
    }

    /// Every server reads "tokens revoked in the last seconds" once a
    /// second while streams are open: through an index of revoked tokens
    /// only, not a scan of every token ever issued.
    @Test func theRevocationWatchReadsAnIndexNotEveryToken() throws {
        let directory = try TemporaryDirectory(prefix: "outpost-revocations")
        let database = try SQLiteServerDatabase(path: directory.path("server.sqlite"))
        defer { database.close() }
        _ = try SyncServer(database: database, config: try ServerConfig())
        let plan = try database.read { sql in
            try sql.query(
                "EXPLAIN QUERY PLAN SELECT hash FROM tokens WHERE revoked_at IS NOT NULL AND revoked_at >= ?",
                [.text("2026-01-01T00:00:00Z")])
        }.map { $0.string(3) }
        #expect(plan.contains { $0.contains("USING INDEX tokens_by_revocation") }, "\(plan)")
    }

    @Test func shutdownEndsEveryStreamWithUnavailable() async throws {
        let live = try LiveServer(.sqlite, config: try Self.config())
        let ana = try live.token("u-1")
        let first = try await EventReader(live, "/v1/stream", token: ana)
        let second = try await EventReader(live, "/v1/stream", token: ana)
        try await first.wait("open") { !$0.isEmpty }
        try await second.wait("open") { !$0.isEmpty }
        let cursor = try #require(try await live.pullAll(token: ana).cursor).rawValue
        let poll = Task { try await live.get("/v1/pull?cursor=\(cursor)&wait=30", token: ana) }
        try await eventually("the long poll waits") { live.server.liveConnections == 3 }
        live.http.stop()
        for stream in [first, second] {
            try await stream.wait("the shutdown event") { $0.contains { $0.name == "error" } }
            let body = try WireCoding.decode(ErrorBody.self, from: try #require(stream.all.last).data)
            #expect(body.code == .unavailable)
        }
        let answer = try await poll.value(within: .seconds(10), "the long poll answered at shutdown")
        #expect(answer.status == 503 && answer.headers["retry-after"] != nil, "\(answer.status) \(answer.headers) \(answer.text)")
    }

    @Test func heartbeatsKeepAnIdleStreamVisiblyAlive() async throws {
        let live = try LiveServer(.sqlite, config: try Self.config(heartbeat: 1))
        let ana = try live.token("u-1")
        let stream = try await EventReader(live, "/v1/stream", token: ana)
        try await stream.wait("three heartbeats", timeout: .seconds(10)) { $0.filter { $0.name == "heartbeat" }.count >= 3 }
        let beat = try #require(stream.all.last)
        #expect(String(decoding: beat.data, as: UTF8.self).contains("server_time"))
    }

    @Test func badLiveRequestsAreClearErrors() async throws {
        let live = try LiveServer(.sqlite, config: try Self.config())
        let ana = try live.token("u-1")
        let badWait = try await live.get("/v1/pull?wait=abc", token: ana)
        #expect(badWait.status == 400 && badWait.error?.fields?["wait"] != nil)
        #expect(try await live.get("/v1/pull?wait=61", token: ana).status == 400)
        let noToken = try await EventReader(live, "/v1/stream", token: nil)
        #expect(noToken.status == 401)
        let badCursor = try await EventReader(live, "/v1/stream?cursor=nonsense", token: ana)
        #expect(badCursor.status == 400)
        let unknown = try await EventReader(live, "/v1/stream?collections=nope", token: ana)
        #expect(unknown.status == 400)
        #expect(live.server.liveConnections == 0, "nothing left waiting after a refusal")
    }
}
