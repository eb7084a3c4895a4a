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

        init() throws {
            connection = try PostgresConnection(
                url: try #require(Backend.postgresURL), redactedURL: "the test database",
                timeouts: try DatabaseTimeouts(lock: 30, statement: 60), failureKind: .failure)
            try connection.command("BEGIN")
            try connection.command("SELECT pg_advisory_xact_lock(\(PostgresDatabase.writeLockKey))")
        }

        func release() {
            connection.rollback()
            connection.finish()
        }

        deinit { release() }
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

        let frozen = try FrozenServer()
        let started = ContinuousClock.now
        async let blocked = RawHTTP.onThread { try RawHTTP.push(port: port, token: token, body: body) }
        try await Task.sleep(for: .milliseconds(300))
        let probe = ContinuousClock.now
        let health = try await RawHTTP.onThread { try RawHTTP.get(port: port, "/v1/health") }
        let healthTook = ContinuousClock.now - probe
        let refused = try await blocked
        let refusedAfter = ContinuousClock.now - started
        let logged = lines.all.filter { $0.contains(#""status":503"#) }
        print("FrozenLockHolder: push refused after \(refusedAfter), health answered in \(healthTook) while the lock was held; \(logged)")

        #expect(health.status == 200)
        #expect(healthTook < .seconds(1), "health waited on the write path: \(healthTook)")
        #expect(refused.status == 503, "\(refused.status) \(String(decoding: refused.body, as: UTF8.self))")
        #expect((try? WireCoding.decode(ErrorBody.self, from: Data(refused.body)))?.code == .unavailable)
        #expect(refused.headers["retry-after"].flatMap(Int.init).map { $0 >= 1 } == true)
        #expect(refusedAfter < .seconds(lockTimeout + 3), "the push waited \(refusedAfter) with a \(lockTimeout) s lock timeout")
        #expect(logged.count == 1 && logged.allSatisfy { $0.contains("55P03") }, "no cause logged for the 503: \(logged)")
        #expect(!lines.all.contains { $0.contains(token) || $0.contains("Ana") })

        // Several writers at once: each gives up within the timeout, none queues behind the others for longer.
        let burstStart = ContinuousClock.now
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    let other = TestDevice()
                    let request = try WireCoding.encode(other.request(other.mutation(.create, data: ["name": "Bea"])))
                    return try await RawHTTP.onThread { try RawHTTP.push(port: port, token: token, body: request) }.status
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses == [503, 503, 503])
        #expect(ContinuousClock.now - burstStart < .seconds(lockTimeout * 2 + 3))

        // Unfrozen: the resend applies (other tests share the lock, so a busy moment may still answer 503 once).
        frozen.release()
        var accepted = try await RawHTTP.onThread { try RawHTTP.push(port: port, token: token, body: body) }
        for _ in 0..<5 where accepted.status == 503 {
            try await Task.sleep(for: .seconds(1))
            accepted = try await RawHTTP.onThread { try RawHTTP.push(port: port, token: token, body: body) }
        }
        #expect(accepted.status == 200, "\(String(decoding: accepted.body, as: UTF8.self))")
        let results = try WireCoding.decode(PushResponse.self, from: Data(accepted.body)).results
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
