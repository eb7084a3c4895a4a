import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// The change feed has no gaps under concurrent writers, and two
/// server processes on one PostgreSQL keep idempotency and order.
@Suite("Change feed", .timeLimit(.minutes(5)))
struct ChangeFeedTests {
    @Test(arguments: Backend.available)
    func aReaderPullingInALoopGetsEveryRecordExactlyOnce(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let reader = try live.token("c-1", .coordinator, team: "t-1")
        // The slow writer holds its transaction open before committing: it
        // started first and commits last.
        live.server.hooks.beforePushCommit = { user in
            if user == "slow" { Thread.sleep(forTimeInterval: 0.3) }
        }
        let writers = ["slow", "w-1", "w-2", "w-3"]
        let tokens = try writers.map { try live.token($0, team: "t-1") }
        let done = ManagedFlag()

        async let written: [UUID] = withThrowingTaskGroup(of: [UUID].self) { group in
            for (index, token) in tokens.enumerated() {
                group.addTask {
                    let device = TestDevice()
                    var uuids: [UUID] = []
                    for round in 0..<(index == 0 ? 4 : 15) {
                        let uuid = UUID()
                        uuids.append(uuid)
                        _ = try await live.push(
                            device.request(device.mutation(.create, uuid: uuid, data: ["name": .string("\(index)-\(round)")])),
                            token: token)
                    }
                    return uuids
                }
            }
            var all: [UUID] = []
            for try await uuids in group { all += uuids }
            done.set()
            return all
        }

        var seen: [UUID] = []
        var cursor: PullCursor?
        var pulls = 0
        while true {
            let finished = done.isSet
            let page = try await live.pullAll(token: reader, cursor: cursor, limit: 5, query: "&collections=people")
            seen += page.changes.map(\.uuid)
            cursor = page.cursor
            pulls += 1
            if finished { break }
            try await Task.sleep(for: .milliseconds(15))
        }
        let all = try await written
        #expect(all.count == 49)
        #expect(seen.count == all.count, "each record exactly once (\(pulls) pulls)")
        #expect(Set(seen) == Set(all), "no record skipped")
    }

    @Test(.enabled(if: Backend.postgresURL != nil, "needs scripts/with-postgres"))
    func twoServerProcessesOnOnePostgreSQL() async throws {
        let directory = try TemporaryDirectory()
        let (database, location) = try Backend.postgres.makeDatabase(in: directory)
        database.close()
        let token = try await runBlocking {
            try OutpostProcess.run(["token", "issue", "--database", location, "--user", "u-1", "--role", "field", "--team", "t-1"])
        }.split(separator: "\n").last.map(String.init) ?? ""
        let first = try await runBlocking { try OutpostProcess.serve(location) }
        let second = try await runBlocking { try OutpostProcess.serve(location) }
        defer {
            first.stop()
            second.stop()
        }
        let servers = [first, second]
        let device = TestDevice()
        var created: [UUID] = []
        var duplicates = 0
        for round in 0..<20 {
            let uuid = UUID()
            created.append(uuid)
            let request = device.request(device.mutation(.create, uuid: uuid, data: ["name": .string("P\(round)")]))
            let answer = try await servers[round % 2].push(request, token: token)
            #expect(answer.results[0].status == .applied)
            // The answer is "lost": the device resends to the other process.
            let again = try await servers[(round + 1) % 2].push(request, token: token)
            #expect(again.results[0].status == .duplicate)
            #expect(again.results[0].record?.version == answer.results[0].record?.version)
            duplicates += 1
        }
        // Pull alternating between the processes, one record per page.
        var cursor: String?
        var seen: [UUID] = []
        for index in 0..<40 {
            let page = try await servers[index % 2].pull(cursor: cursor, token: token)
            seen += page.changes.map(\.uuid)
            cursor = page.cursor.rawValue
            if !page.hasMore { break }
        }
        #expect(seen == created, "every record once, in commit order, across both processes")
        #expect(duplicates == 20)
    }
}

/// A flag set by one task and read by another.
final class ManagedFlag: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched while `lock` is held.
    private let lock = NSLock()
    private var value = false
    func set() {
        lock.lock()
        value = true
        lock.unlock()
    }
    var isSet: Bool {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
}
