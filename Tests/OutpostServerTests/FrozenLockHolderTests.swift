import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// A server frozen while it holds the write lock (SIGSTOP, a debugger, a
/// swapped-out VM) must not stop the others: their writes wait at most the
/// lock timeout and answer 503 with `Retry-After`, health answers at once,
/// and writes go through again once the lock is free. The frozen server is
/// a separate libpq connection that takes the same advisory lock and then
/// does nothing, which is all a frozen server does.
@Suite(
    "Postgres: a frozen write-lock holder",
    .enabled(if: Backend.postgresURL != nil, "needs scripts/with-postgres"),
    .timeLimit(.minutes(2))
)
struct FrozenLockHolderTests {
    /// A transaction that holds the write lock until `release()`.
    final class FrozenServer {
        let connection: PostgresConnection

        /// On the database at `url` (a test schema's location).
        init(url: String) throws {
            connection = try PostgresConnection(
                url: url, redactedURL: "the test database",
                timeouts: try DatabaseTimeouts(lock: 30, statement: 60), failureKind: .failure)
            // PostgreSQL ends the frozen transaction itself should this test ever stall.
            try connection.command("SET idle_in_transaction_session_timeout = 20000")
            try connection.command("BEGIN")
            try connection.command(PostgresDatabase.writeLockStatement)
        }

        func release() {
            connection.rollback()
            connection.finish()
        }
        // `release` runs on the scenario's thread only.

        deinit { release() }
    }

    /// What the scenario saw, each time measured on the thread that waited.
    struct Outcome: Sendable {
        var refused: HostileSocket.Reply
        var refusedAfter: Duration
        var health: HostileSocket.Reply
        var healthTook: Duration
        var burst: [Int]
        var burstTook: Duration
        var accepted: HostileSocket.Reply
    }

    @Test func pushesAnswer503WithRetryAfterWithinTheLockTimeoutHealthAtOnceAndThenTheyApply() async throws {
        let lockTimeout = 2.0
        let lines = LogLines()
        let live = try LiveServer(
            .postgres, databaseTimeouts: try DatabaseTimeouts(lock: lockTimeout, statement: 10), log: lines.append)
        let token = try live.token("f-1")
        let port = live.http.port
        let device = TestDevice()
        let body = try WireCoding.encode(device.request(device.mutation(.create, data: ["name": "Ana"])))
        let others = try (0..<3).map { _ in
            let other = TestDevice()
            return try WireCoding.encode(other.request(other.mutation(.create, data: ["name": "Bea"])))
        }

        // On threads of its own: while the lock is held, the synchronous
        // tests waiting on it may hold the cooperative pool, and the lock
        // must be released whatever they do.
        let outcome = try await RawHTTP.onThread { () throws -> Outcome in
            let frozen = try FrozenServer(url: live.location)
            defer { frozen.release() }
            let started = ContinuousClock.now
            let push = Background { try RawHTTP.push(port: port, token: token, body: body) }
            usleep(300_000)
            let probe = ContinuousClock.now
            let health = try RawHTTP.get(port: port, "/v1/health")
            let healthTook = ContinuousClock.now - probe
            let refused = try push.value()
            let refusedAfter = ContinuousClock.now - started

            // Several writers at once: each gives up after its own lock timeout
            // (one HTTP thread may accept all three and take them in turn).
            let burstStart = ContinuousClock.now
            let burst = try others.map { other in Background { try RawHTTP.push(port: port, token: token, body: other) } }
                .map { try $0.value().status }
            let burstTook = ContinuousClock.now - burstStart

            // Unfrozen: the resend applies (other tests share the lock, so a busy moment may still answer 503).
            frozen.release()
            var accepted = try RawHTTP.push(port: port, token: token, body: body)
            for _ in 0..<5 where accepted.status == 503 {
                sleep(1)
                accepted = try RawHTTP.push(port: port, token: token, body: body)
            }
            return Outcome(
                refused: refused, refusedAfter: refusedAfter, health: health, healthTook: healthTook, burst: burst,
                burstTook: burstTook, accepted: accepted)
        }
        let logged = lines.all.filter { $0.contains(#""status":503"#) }
        print("FrozenLockHolder: push refused after \(outcome.refusedAfter), health answered in \(outcome.healthTook) while the lock was held; 3 more writers refused in \(outcome.burstTook); first 503 log line: \(logged.first ?? "none")")

        #expect(outcome.health.status == 200)
        #expect(outcome.healthTook < .seconds(1), "health waited on the write path: \(outcome.healthTook)")
        let refused = outcome.refused
        #expect(refused.status == 503, "\(refused.status) \(String(decoding: refused.body, as: UTF8.self))")
        #expect((try? WireCoding.decode(ErrorBody.self, from: Data(refused.body)))?.code == .unavailable)
        #expect(refused.headers["retry-after"].flatMap(Int.init).map { $0 >= 1 } == true)
        #expect(outcome.refusedAfter < .seconds(lockTimeout + 3), "the push waited \(outcome.refusedAfter) with a \(lockTimeout) s lock timeout")
        #expect(logged.count >= 4 && logged.allSatisfy { $0.contains("55P03") || $0.contains("write lock") }, "a 503 without its cause: \(logged)")
        #expect(!lines.all.contains { $0.contains(token) || $0.contains("Ana") })
        #expect(outcome.burst == [503, 503, 503])
        #expect(outcome.burstTook < .seconds(lockTimeout * 3 + 3))
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

    static func get(port: UInt16, _ target: String) throws -> HostileSocket.Reply {
        let request = "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
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
