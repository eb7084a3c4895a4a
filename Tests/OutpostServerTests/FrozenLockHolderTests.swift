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
        var config = try ServerConfig()
        config.databaseTimeouts = try DatabaseTimeouts(lock: 1, statement: 5)
        let lines = LogLines()
        let live = try LiveServer(.postgres, config: config, log: lines.append)
        let token = try live.token("f-1")
        let device = TestDevice()
        let body = try WireCoding.encode(device.request(device.mutation(.create, data: ["name": "Ana"])))

        let frozen = try FrozenServer()
        let started = ContinuousClock.now
        async let blocked = live.send("POST", "/v1/push", token: token, body: body)
        try await Task.sleep(for: .milliseconds(200))
        let probe = ContinuousClock.now
        let health = try await live.get("/v1/health", token: nil)
        let healthTook = ContinuousClock.now - probe
        let refused = try await blocked
        let refusedAfter = ContinuousClock.now - started
        let logged = lines.all.filter { $0.contains(#""status":503"#) }
        print("FrozenLockHolder: push refused after \(refusedAfter), health answered in \(healthTook) while the lock was held; \(logged)")

        #expect(health.status == 200)
        #expect(healthTook < .milliseconds(500), "health waited on the write path: \(healthTook)")
        #expect(refused.status == 503, "\(refused.status) \(refused.text)")
        #expect(refused.error?.code == .unavailable)
        #expect(refused.headers["retry-after"].flatMap(Int.init).map { $0 >= 1 } == true)
        #expect(refusedAfter < .seconds(4), "the push waited \(refusedAfter) with a 1 s lock timeout")
        #expect(logged.count == 1 && logged.allSatisfy { $0.contains("55P03") }, "no cause logged for the 503: \(logged)")
        #expect(!lines.all.contains { $0.contains(token) || $0.contains("Ana") })

        // Several writers at once: each gives up within the timeout, none queues behind the others for longer.
        let burstStart = ContinuousClock.now
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    let other = TestDevice()
                    let request = try WireCoding.encode(other.request(other.mutation(.create, data: ["name": "Bea"])))
                    return try await live.send("POST", "/v1/push", token: token, body: request).status
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses == [503, 503, 503])
        #expect(ContinuousClock.now - burstStart < .seconds(5))

        frozen.release()
        let accepted = try await live.send("POST", "/v1/push", token: token, body: body)
        #expect(accepted.status == 200, "\(accepted.text)")
        #expect(try accepted.decode(PushResponse.self).results.map(\.status) == [.applied])
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
