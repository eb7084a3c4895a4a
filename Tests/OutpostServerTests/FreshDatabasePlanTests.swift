import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// A new deployment has no table statistics until autovacuum's first
/// ANALYZE. A push's lookups must use their key's index all the same: on
/// PostgreSQL, the earlier-results lookup that also named the user and
/// client walked the primary key through every result of the client and
/// filtered by id, so each push of a long queue took longer than the last.
@Suite("Plans on a new database", .timeLimit(.minutes(5)))
struct FreshDatabasePlanTests {
    @Test(arguments: Backend.available)
    func aPushsLookupsUseTheirKeysBeforeAnyStatistics(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        if backend == .postgres {
            // No ANALYZE may run behind the test's back: these tables stay without statistics.
            _ = try live.database.write { sql in
                for table in ["records", "mutation_results", "client_seqs"] {
                    try sql.execute("ALTER TABLE \(table) SET (autovacuum_enabled = false)", [])
                }
            }
        }
        let token = try live.token("u-1")
        let device = TestDevice()
        let other = TestDevice()
        var last: Mutation?
        for _ in 0..<3 {
            let creates = (0..<200).map { index in device.mutation(.create, data: ["name": .string("Person \(index)")]) }
            _ = try await live.push(PushRequest(clientID: device.clientID, mutations: creates), token: token)
            _ = try await live.push(other.request(other.mutation(.create, data: ["name": "Other"])), token: token)
            last = creates.last
        }
        let probe = try #require(last)

        let lookups: [(what: String, sql: String, arguments: [SQLValue], key: String)] = [
            ("a record by its uuid", PushSession.recordQuery, [.text("people"), .text(probe.uuid.wireText)], "uuid"),
            (
                "earlier results by mutation id", PushSession.resultsByIDQuery(2),
                [.text(probe.id.wireText), .text(UUID().wireText)], "mutation_id"
            ),
            (
                "a client's mutation ids by seq", PushSession.idsBySeqQuery,
                [.text("u-1"), .text(device.clientID.wireText), .integer(probe.seq - 3), .integer(probe.seq)], "seq"
            ),
        ]
        for lookup in lookups {
            let plan = try live.database.read { sql in
                try sql.query(
                    backend == .postgres
                        ? "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + lookup.sql : "EXPLAIN QUERY PLAN " + lookup.sql,
                    lookup.arguments
                ).map { $0.values.map { value in if case .text(let text) = value { text } else { "" } }.joined(separator: " ") }
                .joined(separator: "\n")
            }
            if backend == .postgres {
                #expect(plan.contains("Index Cond") && plan.contains(lookup.key), "\(lookup.what): \(plan)")
                #expect(!plan.contains("Rows Removed by Filter"), "\(lookup.what) walked rows it then dropped: \(plan)")
                #expect(!plan.contains("Seq Scan"), "\(lookup.what): \(plan)")
            } else {
                #expect(plan.contains("\(lookup.key)=?") || plan.contains("\(lookup.key)>?"), "\(lookup.what): \(plan)")
                #expect(!plan.contains("SCAN"), "\(lookup.what) scans a table: \(plan)")
            }
        }
    }
}
