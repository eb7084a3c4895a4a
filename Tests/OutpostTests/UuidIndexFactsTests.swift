import Foundation
import OutpostCore
import OutpostSQLite
import OutpostTesting
import Testing

@testable import Outpost

/// Whether a table's uuid index is there is read once per schema version
/// and kept on the connection: a change by another process, or a rollback
/// of this connection's own, is seen at the next write.
@Suite("The uuid index's presence kept per connection", .timeLimit(.minutes(2)))
struct UuidIndexFactsTests {
    struct Abort: Error {}

    static func schemaVersion(_ connection: SQLiteConnection) throws -> Int64 {
        try connection.first("PRAGMA schema_version") { $0.int64(0) } ?? -1
    }

    /// A table with the uuid index, on a connection of its own.
    static func table(in directory: TemporaryDirectory) throws -> (SQLiteConnection, RecordTable) {
        let connection = try SQLiteConnection(path: directory.path("facts.sqlite"))
        let table = RecordTable("people", connection)
        try table.ensure(indexedFields: [], sealed: false)
        return (connection, table)
    }

    @Test func theAnswerIsKeptUntilTheSchemaChanges() throws {
        let directory = try TemporaryDirectory()
        let (connection, table) = try Self.table(in: directory)
        defer { connection.close() }
        #expect(try table.hasUuidIndex())
        let version = try Self.schemaVersion(connection)
        #expect(connection.schemaFacts.fact("people_uuid_key", at: version) == true, "kept for this schema version")
        #expect(connection.schemaFacts.fact("people_uuid_key", at: version + 1) == nil, "no answer for another version")

        // Another process drops the index: the version moves, and the next look reads the schema again.
        let other = try SQLiteConnection(path: connection.path)
        defer { other.close() }
        try other.execute("DROP INDEX people_uuid_key")
        #expect(try !table.hasUuidIndex(), "another connection's drop is seen")
        try table.ensureUuidIndex()
        #expect(try other.first("SELECT 1 FROM sqlite_schema WHERE name = 'people_uuid_key'") { _ in true } == true)
        try other.execute("CREATE TABLE elsewhere (x)")
        #expect(try table.hasUuidIndex(), "an unrelated change reads the schema again and finds the index")
    }

    /// A rollback takes the index back; the schema version goes back with
    /// it, and the next change reaches the number the index had.
    @Test func aRolledBackIndexIsNotTakenForOne() throws {
        let directory = try TemporaryDirectory()
        let (connection, table) = try Self.table(in: directory)
        defer { connection.close() }
        try table.dropUuidIndex()
        #expect(try !table.hasUuidIndex())
        let before = try Self.schemaVersion(connection)
        #expect(throws: Abort.self) {
            try connection.transaction {
                try table.ensureUuidIndex()
                #expect(try table.hasUuidIndex())
                throw Abort()
            }
        }
        let other = try SQLiteConnection(path: connection.path)
        defer { other.close() }
        try other.execute("CREATE TABLE elsewhere (x)")
        #expect(try Self.schemaVersion(connection) == before + 1, "the version the rolled-back index had")
        #expect(try !table.hasUuidIndex(), "the index went with the rollback")
    }

    /// Through the store: an index another process dropped is made again
    /// by the next local write, and one it made mid-download is used by the
    /// download's next page (which then upserts instead of appending).
    @Test func theStoreSeesIndexesAnotherProcessDroppedOrMade() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let kept = try await store.create(Person(name: "First"))
        let other = try SQLiteConnection(path: fixture.path)
        defer { other.close() }
        try other.execute("DROP INDEX people_uuid_key")
        _ = try await store.create(Person(name: "Second"))
        #expect(try FirstDownloadIndexTests.hasUuidIndex(fixture.path), "the local write made the index again")
        try FirstDownloadIndexTests.expectUniqueUuids(fixture.path, holding: kept)

        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let downloading = try LocalStore(path: path, collections: StoreFixture.collections)
        let uuids = (0..<120).map { _ in UUID() }
        try await downloading.applyPull(
            FirstDownloadIndexTests.page(FirstDownloadIndexTests.people(uuids[0..<60], first: 1), cursor: "c1", hasMore: true),
            collections: FirstDownloadIndexTests.collections)
        #expect(try !FirstDownloadIndexTests.hasUuidIndex(path))
        let maker = try SQLiteConnection(path: path)
        try maker.execute("CREATE UNIQUE INDEX people_uuid_key ON people (uuid)")
        maker.close()
        let next = try await downloading.applyPull(
            FirstDownloadIndexTests.page(
                [FirstDownloadIndexTests.person(uuids[0], version: 200, name: "Newer")]
                    + FirstDownloadIndexTests.people(uuids[60...], first: 61), cursor: "c2", hasMore: false),
            collections: FirstDownloadIndexTests.collections)
        #expect(next.applied == 61)
        #expect(try FirstDownloadIndexTests.rowCount(path) == 120, "the repeat found its row through the index")
        #expect(try await downloading.get(Person.self, uuids[0])?.value.name == "Newer")
        await downloading.close()
    }
}
