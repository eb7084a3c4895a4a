import Foundation
import Outpost
import OutpostCore
import OutpostSQLite
import OutpostTesting
import Testing

/// Look-ups the engine makes after every push, whatever the queue's
/// length, must each be answered from a small index, never by reading the
/// whole queue: the queue's status is published after every settled push.
@Suite("The store's query plans", .timeLimit(.minutes(2)))
struct StorePlanTests {
    /// The plan SQLite chooses for `sql` on the store's file, as one line per step.
    static func plan(_ sql: String, in path: String) throws -> String {
        let file = try SQLiteConnection(path: path, readOnly: true)
        defer { file.close() }
        return try file.query("EXPLAIN QUERY PLAN " + sql) { $0.string(3) }.joined(separator: "\n")
    }

    /// A store holding `creates` never-sent people, closed (its folder
    /// lives as long as the fixture).
    static func closedStore(creates: Int) async throws -> StoreFixture {
        let fixture = try StoreFixture()
        for index in 0..<creates { try await fixture.store.create(Person(name: "p\(index)")) }
        await fixture.store.close()
        return fixture
    }

    @Test func theQueueStatusCountsFromIndexesNotTheQueue() async throws {
        let fixture = try await Self.closedStore(creates: 300)
        let path = fixture.path

        let checking = try Self.plan(OutboxStatusQueries.checkingCount(notIn: "1,2"), in: path)
        #expect(checking.contains("outbox_unknown_outcome"), "\(checking)")
        let held = try Self.plan("SELECT * FROM outbox WHERE \(OutboxStatusQueries.heldCandidates) ORDER BY entry", in: path)
        #expect(held.contains("USING INDEX outbox_with_parents"), "\(held)")
        let total = try Self.plan("SELECT COUNT(*) FROM outbox", in: path)
        #expect(total.contains("COVERING INDEX"), "\(total)")
        // Asked at the start of every cycle: a walk of the partial index,
        // which holds only entries that were ever refused.
        let spent = try Self.plan("SELECT * FROM outbox WHERE \(OutboxStatusQueries.spentBudget) ORDER BY entry", in: path)
        #expect(spent == "SCAN outbox USING INDEX outbox_failing", "\(spent)")
    }

    /// Marking a batch's records as sending is one statement per
    /// collection; it must find each record by its key, not scan the table.
    @Test func aBatchsRecordsAreMarkedByTheirKeys() async throws {
        let fixture = try await Self.closedStore(creates: 300)
        let path = fixture.path
        let plan = try Self.plan(RecordStateQueries.setStates(in: "people"), in: path)
        #expect(plan.contains("SEARCH people USING INDEX people_uuid_key (uuid=?)"), "\(plan)")
        #expect(!plan.contains("SCAN people"), "\(plan)")
    }

    @Test func anOrdinaryWriteAddsNothingToTheStatusIndexes() async throws {
        let fixture = try await Self.closedStore(creates: 50)
        let path = fixture.path
        let file = try SQLiteConnection(path: path, readOnly: true)
        defer { file.close() }
        // Entries the partial indexes hold: none for writes without parents that were never sent.
        let withParents = try file.first("SELECT COUNT(*) FROM outbox INDEXED BY outbox_with_parents WHERE parents != ''") { $0.int64(0) }
        let unknown = try file.first("SELECT COUNT(*) FROM outbox INDEXED BY outbox_unknown_outcome WHERE unknown_outcome != 0") { $0.int64(0) }
        let failing = try file.first("SELECT COUNT(*) FROM outbox INDEXED BY outbox_failing WHERE failures > 0") { $0.int64(0) }
        #expect(withParents == 0 && unknown == 0 && failing == 0)
        #expect(try file.first("SELECT COUNT(*) FROM outbox") { $0.int64(0) } == 50)
        // Both are partial, so an entry outside their conditions never writes them.
        let definitions = try file.query(
            "SELECT sql FROM sqlite_schema WHERE name IN ('outbox_with_parents', 'outbox_unknown_outcome', 'outbox_failing') ORDER BY name"
        ) { $0.string(0) }
        #expect(definitions.count == 3)
        #expect(definitions.first?.contains("WHERE failures > 0") == true, "\(definitions)")
        #expect(definitions.dropFirst().first?.contains("WHERE unknown_outcome != 0") == true, "\(definitions)")
        #expect(definitions.last?.contains("WHERE parents != ''") == true, "\(definitions)")
    }
}
