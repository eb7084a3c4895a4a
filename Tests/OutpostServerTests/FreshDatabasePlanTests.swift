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
        let ids = try live.database.read { try ResultIDs.current($0) }

        let lookups: [(what: String, sql: String, arguments: [SQLValue], key: String)] = [
            ("a record by its uuid", ServerRecord.lookupQuery, [.text("people"), .text(probe.uuid.wireText)], "uuid"),
            (
                "earlier results by mutation id", PushSession.resultsByIDQuery(2),
                [ids.value(probe.id), ids.value(UUID())], "mutation_id"
            ),
            (
                "a client's mutation ids by seq", PushSession.idsBySeqQuery,
                [.text("u-1"), ids.value(device.clientID), .integer(probe.seq - 3), .integer(probe.seq)], "seq"
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

/// The reads that walk a whole scope or the whole feed, on SQLite, where
/// the plan does not depend on statistics: a first download waits for the
/// scope's count, and housekeeping looks for tombstones under the write lock.
@Suite("Plans of the scope count and of housekeeping", .timeLimit(.minutes(5)))
struct ScopeCountPlanTests {
    static func plan(_ live: LiveServer, _ query: String, _ arguments: [SQLValue]) throws -> String {
        try live.database.read { sql in
            try sql.query("EXPLAIN QUERY PLAN " + query, arguments).map { $0.string(3) }.joined(separator: "\n")
        }
    }

    /// Every branch of every role is counted from an index alone: no row of
    /// the table is read and nothing is sorted (a GROUP BY sorted every
    /// counted row; an OR of the branches read every row).
    @Test func everyBranchOfTheScopeCountReadsAnIndexAlone() async throws {
        let live = try LiveServer(.sqlite)
        let principals = [
            Principal(user: "f-1", role: .field, team: "t-1"), Principal(user: "c-1", role: .coordinator, team: "t-1"),
            Principal(user: "a-1", role: .admin, team: "hq"),
        ]
        for principal in principals {
            let branches = Scope(principal: principal, config: live.server.config).disjointBranches()
            #expect(!branches.isEmpty)
            for branch in branches {
                let arguments = branch.collections.map { SQLValue.text($0) } + branch.arguments
                let plan = try Self.plan(live, ReadService.countQuery(branch.collections.count, where: branch.condition), arguments)
                #expect(plan.contains("USING COVERING INDEX"), "\(principal.role) \(branch.condition): \(plan)")
                #expect(!plan.contains("SCAN") && !plan.contains("TEMP B-TREE"), "\(principal.role) \(branch.condition): \(plan)")
            }
        }
    }

    /// The branches of a count share no record: a record of a read-only
    /// collection that a field worker owns is counted once.
    @Test func aReadOnlyRecordOwnedByTheCallerIsCountedOnce() async throws {
        let live = try LiveServer(.sqlite)
        let token = try live.token("f-1")
        let before = try await live.get("/v1/scope", token: token).decode(ScopeResponse.self)
        _ = try live.database.write { sql in
            try sql.execute(
                """
                INSERT INTO records (collection, uuid, version, updated_at, owner, team, created_by_user, created_by_client, data)
                VALUES ('catalogs', ?, 999999, '2026-01-01T00:00:00Z', 'f-1', 't-1', 'f-1', 'c', '{}')
                """, [.text(UUID().wireText)])
        }
        let after = try await live.get("/v1/scope", token: token).decode(ScopeResponse.self)
        #expect(after.collections["catalogs"]?.count == (before.collections["catalogs"]?.count ?? 0) + 1)
    }

    @Test func housekeepingFindsTombstonesByTheirOwnIndex() async throws {
        let live = try LiveServer(.sqlite)
        let plan = try Self.plan(live, Maintenance.newestPurgeableQuery, [.text("2026-01-01T00:00:00Z")])
        #expect(plan.contains("records_tombstones"), "\(plan)")
        #expect(!plan.contains("records_by_version"), "\(plan)")
    }
}
