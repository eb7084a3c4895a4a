import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// A server frozen inside a write transaction (SIGSTOP, a debugger, a
/// swapped-out VM) must not stop the others. Writers take no common lock, so
/// only a push that needs a row the frozen one holds waits, at most the lock
/// timeout, and answers 503 with `Retry-After`; every other user's push goes
/// through at once, and health answers at once. The frozen transaction also
/// holds back the change feed's watermark, until PostgreSQL ends it by the
/// idle-in-transaction timeout every Outpost connection sets: then the
/// feed moves on and the refused push applies. The frozen server is a
/// separate libpq connection that locks one client's sequence row, as a
/// frozen server mid-push does, and then does nothing.
@Suite(
    "Postgres: a server frozen inside a write",
    .enabled(if: Backend.postgresURL != nil, "needs scripts/with-postgres"),
    .timeLimit(.minutes(2))
)
struct FrozenLockHolderTests {
    /// A transaction holding one client's row lock, ended by PostgreSQL
    /// after `idleTimeout` seconds of doing nothing.
    final class FrozenServer {
        let connection: PostgresConnection

        init(url: String, user: String, client: UUID, idleTimeout: TimeInterval) throws {
            connection = try PostgresConnection(
                url: url, redactedURL: "the test database",
                timeouts: try DatabaseTimeouts(lock: 30, statement: 60), failureKind: .failure)
            try connection.command("SET idle_in_transaction_session_timeout = \(Int(idleTimeout * 1000))")
            try connection.command("BEGIN")
            try connection.command(
                "SELECT last_seq FROM client_seqs WHERE user_id = '\(user)' AND client_id = '\(client.wireText)' FOR UPDATE")
        }

        func release() {
            connection.rollback()
            connection.finish()
        }

        deinit { release() }
    }

    /// What the scenario saw, each time measured on the thread that waited.
    struct Outcome: Sendable {
        var refused: HostileSocket.Reply
        var refusedAfter: Duration
        var health: HostileSocket.Reply
        var healthTook: Duration
        var others: [Int]
        var othersTook: Duration
        var feedAfter: Duration
        var feedChanges: Int
        var accepted: HostileSocket.Reply
    }

    @Test func onlyThePushNeedingTheFrozenRowsWaitsOthersApplyAtOnceAndTheFeedMovesOnWhenPostgreSQLEndsIt() async throws {
        let lockTimeout = 2.0
        // Short: the frozen transaction holds back the feed of every test sharing the cluster.
        let frozenFor = 3.0
        let lines = LogLines()
        let live = try LiveServer(
            .postgres, databaseTimeouts: try DatabaseTimeouts(lock: lockTimeout, statement: 10), log: lines.append)
        let token = try live.token("f-1")
        let reader = try live.token("admin-1", .admin)
        let otherTokens = try (2...4).map { try live.token("f-\($0)") }
        let port = live.http.port
        let device = TestDevice()
        // The client's row exists once it has pushed.
        let warmUp = try await live.push(device.request(device.mutation(.create, data: ["name": "Ana"])), token: token)
        #expect(warmUp.results.map(\.status) == [.applied])
        let body = try WireCoding.encode(device.request(device.mutation(.create, data: ["name": "Ana"])))
        let others = try (0..<3).map { _ in
            let other = TestDevice()
            return try WireCoding.encode(other.request(other.mutation(.create, data: ["name": "Bea"])))
        }
        let location = live.location
        let client = device.clientID

        // On threads of its own: the timing of blocked requests must not
        // depend on the cooperative pool.
        let outcome = try await RawHTTP.onThread { () throws -> Outcome in
            let frozen = try FrozenServer(url: location, user: "f-1", client: client, idleTimeout: frozenFor)
            defer { frozen.release() }
            let started = ContinuousClock.now
            let push = Background { try RawHTTP.push(port: port, token: token, body: body) }
            usleep(300_000)
            let probe = ContinuousClock.now
            let health = try RawHTTP.get(port: port, "/v1/health")
            let healthTook = ContinuousClock.now - probe

            // Other users' pushes do not wait for the frozen server.
            let othersStart = ContinuousClock.now
            let otherStatuses = try zip(others, otherTokens).map { other, otherToken in
                Background { try RawHTTP.push(port: port, token: otherToken, body: other) }
            }.map { try $0.value().status }
            let othersTook = ContinuousClock.now - othersStart
            let refused = try push.value()
            let refusedAfter = ContinuousClock.now - started

            // Their changes are committed, but below them a transaction still
            // runs: the feed shows them once PostgreSQL has ended it.
            let pull = try RawHTTP.get(port: port, "/v1/pull?collections=people&limit=100", token: reader)
            let feedAfter = ContinuousClock.now - started
            let page = try WireCoding.decode(PullResponse.self, from: Data(pull.body))

            var accepted = try RawHTTP.push(port: port, token: token, body: body)
            for _ in 0..<5 where accepted.status == 503 {
                sleep(1)
                accepted = try RawHTTP.push(port: port, token: token, body: body)
            }
            return Outcome(
                refused: refused, refusedAfter: refusedAfter, health: health, healthTook: healthTook, others: otherStatuses,
                othersTook: othersTook, feedAfter: feedAfter, feedChanges: page.changes.count, accepted: accepted)
        }
        let logged = lines.all.filter { $0.contains(#""status":503"#) }
        print("FrozenServer: 3 other users' pushes took \(outcome.othersTook); the same client's push refused after \(outcome.refusedAfter); health in \(outcome.healthTook); the feed showed the others' changes after \(outcome.feedAfter) (frozen for \(frozenFor) s); first 503 log line: \(logged.first ?? "none")")

        #expect(outcome.health.status == 200)
        #expect(outcome.healthTook < .seconds(1), "health waited on the write path: \(outcome.healthTook)")
        #expect(outcome.others == [200, 200, 200])
        #expect(outcome.othersTook < .seconds(lockTimeout), "other users waited for the frozen server: \(outcome.othersTook)")
        let refused = outcome.refused
        #expect(refused.status == 503, "\(refused.status) \(String(decoding: refused.body, as: UTF8.self))")
        #expect((try? WireCoding.decode(ErrorBody.self, from: Data(refused.body)))?.code == .unavailable)
        #expect(refused.headers["retry-after"].flatMap(Int.init).map { $0 >= 1 } == true)
        #expect(outcome.refusedAfter < .seconds(lockTimeout + 3), "the push waited \(outcome.refusedAfter) with a \(lockTimeout) s lock timeout")
        #expect(logged.count >= 1 && logged.allSatisfy { $0.contains("55P03") }, "a 503 without its cause: \(logged)")
        #expect(!lines.all.contains { $0.contains(token) || $0.contains("Ana") })
        // Ana's first create and the three others.
        #expect(outcome.feedChanges == 4)
        #expect(outcome.feedAfter < .seconds(frozenFor + 5))
        #expect(outcome.accepted.status == 200, "\(String(decoding: outcome.accepted.body, as: UTF8.self))")
        let results = try WireCoding.decode(PushResponse.self, from: Data(outcome.accepted.body)).results
        #expect(results.map(\.status) == [.applied])
    }

    @Test func aStatementPastTheStatementTimeoutIsTransient() throws {
        let database = try PostgresDatabase(
            url: try #require(Backend.postgresURL), poolSize: 1, timeouts: try DatabaseTimeouts(lock: 1, statement: 1))
        defer { database.close() }
        let started = ContinuousClock.now
        let error = #expect(throws: DatabaseError.self) {
            try database.read { try $0.query("SELECT pg_sleep(10)", []) }
        }
        #expect(error?.kind == .transient)
        #expect(error?.message.contains("57014") == true)
        #expect(ContinuousClock.now - started < .seconds(5))
        // The connection is usable again.
        #expect(try database.read { try $0.first("SELECT 1")?.int(0) } == 1)
    }
}

/// Collects the server's log lines.
final class LogLines: @unchecked Sendable {
    // @unchecked Sendable: `lines` is only touched while `lock` is held.
    private let lock = NSLock()
    private var lines: [String] = []

    var append: HTTPServer.Log {
        { [self] line in
            lock.lock()
            lines.append(line)
            lock.unlock()
        }
    }

    var all: [String] {
        lock.lock()
        defer { lock.unlock() }
        return lines
    }
}

/// Requests over a plain socket on a thread of their own: the timing of a
/// blocked request must not depend on a shared URLSession or the cooperative pool.
enum RawHTTP {
    static func push(port: UInt16, token: String, body: Data) throws -> HostileSocket.Reply {
        let head = "POST /v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return try HostileSocket.exchange(port: port, request: Array(head.utf8) + Array(body), timeoutSeconds: 30)
    }

    static func get(port: UInt16, _ target: String, token: String? = nil) throws -> HostileSocket.Reply {
        let authorization = token.map { "Authorization: Bearer \($0)\r\n" } ?? ""
        let request = "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\(authorization)Connection: close\r\n\r\n"
        return try HostileSocket.exchange(port: port, request: Array(request.utf8), timeoutSeconds: 30)
    }

    static func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }
}

/// A blocking call on a thread of its own, joined with `value()`.
final class Background<T: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `result` is written once before `done` is signalled and read only after waiting on it.
    private var result: Result<T, any Error>?
    private let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () throws -> T) {
        Thread { [self] in
            result = Result { try body() }
            done.signal()
        }.start()
    }

    /// Every call inside is bounded by its socket timeouts; this bound only guards against a bug.
    func value() throws -> T {
        guard done.wait(timeout: .now() + 90) == .success, let result else {
            throw HostileSocket.Failure(description: "a background request did not finish within 90 s")
        }
        return try result.get()
    }
}
