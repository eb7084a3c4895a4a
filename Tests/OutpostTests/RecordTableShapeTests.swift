import Foundation
import Outpost
import OutpostCore
import OutpostSQLite
import OutpostTesting
import Testing

/// Collection tables are rowid tables with the uuid in an index of its own
/// (a download of uuids in no key order appends rows instead of writing
/// pages all over the table); stores made with the earlier shape, rows kept
/// in uuid order, are remade once with everything they hold.
@Suite("The collection tables' shape", .timeLimit(.minutes(3)))
struct RecordTableShapeTests {
    static let time = ServerTimestamp(rawValue: "2026-12-05T10:00:00.000000Z")
    static let tables = ["people", "visits", "outbox", "blobs", "kv", "conflicts", "doubtful_creates", "catalogs"]

    static func person(_ uuid: UUID, version: Int64, name: String) -> PullChange {
        .record(
            WireRecord(
                collection: "people", uuid: uuid, id: version, version: version, updatedAt: time, deleted: false, owner: "u-1",
                team: "t-1", data: ["name": .string(name), "section": .int(version)]))
    }

    static func page(_ changes: [PullChange], cursor: String, hasMore: Bool) throws -> RawPullPage {
        try RawPullPage(PullResponse(changes: changes, cursor: PullCursor(rawValue: cursor), hasMore: hasMore, serverTime: time))
    }

    /// The stored definition of `table`.
    static func definition(_ table: String, in path: String) throws -> String {
        let file = try SQLiteConnection(path: path, readOnly: true)
        defer { file.close() }
        return try file.first("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?", [.text(table)]) { $0.string(0) } ?? ""
    }

    /// Every row of the store's tables, as text, in key order: what must
    /// come through the reshaping unchanged.
    static func contents(_ path: String) throws -> [String: [String]] {
        let file = try SQLiteConnection(path: path, readOnly: true)
        defer { file.close() }
        var contents: [String: [String]] = [:]
        for table in tables {
            let columns = try file.query("PRAGMA table_info(\"\(table)\")") { $0.string(1) }
            let list = columns.map { "quote(\"\($0)\")" }.joined(separator: " || '|' || ")
            contents[table] = try file.query("SELECT \(list) FROM \"\(table)\" ORDER BY 1") { $0.string(0) }
        }
        return contents
    }

    /// Gives a collection table back an earlier shape, as a store made by
    /// an earlier release holds it: the same columns and indexes, the uuid
    /// declared the key, and rows kept in uuid order (`WITHOUT ROWID`) or,
    /// `clustered` false, a rowid table whose key SQLite indexes itself.
    static func makeEarlierShape(_ table: String, in path: String, clustered: Bool = true) throws {
        let file = try SQLiteConnection(path: path)
        defer { file.close() }
        try file.transaction {
            let sql = try file.first("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?", [.text(table)]) { $0.string(0) }!
            let indexes = try file.query(
                "SELECT sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL AND name <> ?",
                [.text(table), .text("\(table)_uuid_key")]
            ) { $0.string(0) }
            try file.execute("ALTER TABLE \"\(table)\" RENAME TO earlier")
            let keyed = sql.replacingOccurrences(of: "uuid TEXT NOT NULL", with: clustered ? "uuid TEXT PRIMARY KEY" : "uuid TEXT PRIMARY KEY NOT NULL")
                .trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: ";", with: "")
            let earlier = clustered ? keyed + " WITHOUT ROWID" : keyed
            try file.execute(earlier)
            try file.execute("INSERT INTO \"\(table)\" SELECT * FROM earlier")
            try file.execute("DROP TABLE earlier")
            for index in indexes { try file.execute(index) }
        }
    }

    /// A store holding synced copies, a local create, an edit and a delete
    /// waiting, a visit, and an attachment; closed.
    static func filledStore(at path: String, cipher: (any PayloadCipher)?) async throws -> [UUID] {
        let store = try LocalStore(path: path, collections: StoreFixture.collections, cipher: cipher)
        let pulled = (0..<150).map { _ in UUID() }
        try await store.applyPull(
            page(pulled.enumerated().map { person($1, version: Int64($0 + 1), name: "P\($0)") }, cursor: "c1", hasMore: false),
            collections: ["people", "visits"])
        let local = try await store.create(Person(name: "Ana", phone: "555", section: 3))
        try await store.update(Person.self, pulled[3]) { $0.name = "Edited" }
        try await store.delete(Person.self, pulled[4])
        _ = try await store.create(Visit(person: local.wireText, visitedAt: "2026-12-05T09:00:00Z"))
        _ = try await store.attach(Data(repeating: 7, count: 3_000), contentType: "image/png")
        await store.close()
        return pulled
    }

    @Test func aNewStoresTablesAreRowidTablesKeyedByUuid() async throws {
        let fixture = try StoreFixture()
        let uuid = try await fixture.store.create(Person(name: "Ana"))
        await fixture.store.close()
        let sql = try Self.definition("people", in: fixture.path)
        #expect(!sql.contains("WITHOUT ROWID"), "\(sql)")
        #expect(sql.contains("uuid TEXT NOT NULL") && !sql.contains("PRIMARY KEY"), "\(sql)")
        let file = try SQLiteConnection(path: fixture.path)
        defer { file.close() }
        // The key stays unique (its own index) and never empty.
        #expect(throws: SQLiteError.self) {
            try file.run("INSERT INTO people (uuid, sync_state, data) VALUES (?, 'pending', '{}')", [.text(uuid.wireText)])
        }
        #expect(throws: SQLiteError.self) { try file.run("INSERT INTO people (uuid, sync_state, data) VALUES (NULL, 'pending', '{}')") }
        #expect(try file.first("SELECT count(*) FROM people") { $0.int64(0) } == 1)
    }

    /// The reads the store makes stay on the uuid's index: by uuid, the
    /// outbox's look-ups of queued records, a batch's states, the doubtful
    /// creates' join; a listing in uuid order walks the index, with no sort.
    @Test func readsFindRecordsThroughTheUuidIndex() async throws {
        let fixture = try StoreFixture()
        for index in 0..<50 { try await fixture.store.create(Person(name: "p\(index)")) }
        await fixture.store.close()
        let byUuid = try StorePlanTests.plan("SELECT * FROM people WHERE uuid = ?", in: fixture.path)
        #expect(byUuid == "SEARCH people USING INDEX people_uuid_key (uuid=?)", "\(byUuid)")
        let queued = try StorePlanTests.plan(
            "SELECT 1 FROM people WHERE uuid IN (SELECT record_uuid FROM outbox WHERE collection = ?) AND sync_state = 'sending'",
            in: fixture.path)
        #expect(queued.contains("SEARCH people USING INDEX people_uuid_key (uuid=?)"), "\(queued)")
        #expect(queued.contains("SEARCH outbox USING COVERING INDEX outbox_by_record (collection=?)"), "\(queued)")
        let states = try StorePlanTests.plan(RecordStateQueries.setStates(in: "people"), in: fixture.path)
        #expect(states.contains("SEARCH people USING INDEX people_uuid_key (uuid=?)"), "\(states)")
        let listing = try StorePlanTests.plan("SELECT * FROM people WHERE deleted = 0 ORDER BY uuid LIMIT 20", in: fixture.path)
        #expect(listing == "SCAN people USING INDEX people_uuid_key", "\(listing)")
        let byField = try StorePlanTests.plan(
            "SELECT * FROM people WHERE deleted = 0 AND json_extract(data, '$.name') = ? ORDER BY uuid", in: fixture.path)
        #expect(byField.contains("SEARCH people USING INDEX people_by_name"), "\(byField)")
    }

    @Test func aStoreOfTheEarlierShapeKeepsEveryRowQueuedChangeAndAttachment() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let pulled = try await Self.filledStore(at: path, cipher: nil)
        for table in ["people", "visits"] { try Self.makeEarlierShape(table, in: path) }
        #expect(try Self.definition("people", in: path).contains("WITHOUT ROWID"))
        let before = try Self.contents(path)
        #expect(before["people"]?.count == 151 && before["outbox"]?.count == 4 && before["blobs"]?.count == 1, "\(before)")

        let store = try LocalStore(path: path, collections: StoreFixture.collections)
        await store.close()
        for table in ["people", "visits"] {
            #expect(!(try Self.definition(table, in: path).contains("WITHOUT ROWID")), "\(table)")
        }
        #expect(try Self.contents(path) == before)
        let indexes = Set(
            try SQLiteConnection(path: path, readOnly: true).query("SELECT name FROM sqlite_schema WHERE tbl_name = 'people'") { $0.string(0) })
        #expect(indexes.isSuperset(of: ["people_rejected", "people_by_name", "people_uuid_key"]), "\(indexes)")

        // Opened again: nothing left to remake, and the store works as before.
        let again = try LocalStore(path: path, collections: StoreFixture.collections)
        #expect(try await again.get(Person.self, pulled[3])?.value.name == "Edited")
        #expect(try await again.get(Person.self, pulled[4]) == nil)
        #expect(try await again.query(Person.self).count == 150)
        try await again.applyPull(
            Self.page([Self.person(pulled[0], version: 500, name: "Newer")], cursor: "c2", hasMore: false), collections: ["people", "visits"])
        #expect(try await again.get(Person.self, pulled[0])?.value.name == "Newer")
        await again.close()
    }

    /// The shape before the uuid's own index: a rowid table keyed by
    /// `uuid TEXT PRIMARY KEY`, whose index cannot be dropped for a first
    /// download. Remade once, every row kept.
    @Test func aStoreKeyedByPrimaryKeyIsRemadeWithTheUuidIndex() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let pulled = try await Self.filledStore(at: path, cipher: nil)
        for table in ["people", "visits"] { try Self.makeEarlierShape(table, in: path, clustered: false) }
        #expect(try Self.definition("people", in: path).contains("uuid TEXT PRIMARY KEY NOT NULL"))
        let before = try Self.contents(path)

        let store = try LocalStore(path: path, collections: StoreFixture.collections)
        await store.close()
        for table in ["people", "visits"] {
            #expect(!(try Self.definition(table, in: path).contains("PRIMARY KEY")), "\(table)")
        }
        #expect(try Self.contents(path) == before)
        let indexes = Set(
            try SQLiteConnection(path: path, readOnly: true).query("SELECT name FROM sqlite_schema WHERE tbl_name = 'people'") { $0.string(0) })
        #expect(indexes == ["people", "people_rejected", "people_by_name", "people_uuid_key"], "\(indexes)")
        let again = try LocalStore(path: path, collections: StoreFixture.collections)
        #expect(try await again.get(Person.self, pulled[3])?.value.name == "Edited")
        await #expect(throws: StoreError.self) { try await again.create(Person(name: "Twice"), uuid: pulled[0]) }
        await again.close()
    }

    @Test func anEncryptedStoreOfTheEarlierShapeKeepsItsSealedRows() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("sealed.sqlite")
        let key = AESGCMCipher.makeKey()
        let pulled = try await Self.filledStore(at: path, cipher: try AESGCMCipher(key: key))
        for table in ["people", "visits"] { try Self.makeEarlierShape(table, in: path) }
        let before = try Self.contents(path)

        let store = try LocalStore(path: path, collections: StoreFixture.collections, cipher: try AESGCMCipher(key: key))
        #expect(try await store.get(Person.self, pulled[3])?.value.name == "Edited")
        #expect(try await store.query(Person.self).count == 150)
        await store.close()
        #expect(!(try Self.definition("people", in: path).contains("WITHOUT ROWID")))
        #expect(try Self.contents(path) == before)
    }

    /// While more pages follow, the page cache is raised; after the last
    /// page it is back to what it was.
    @Test func theCacheIsRaisedOnlyWhileADownloadRuns() async throws {
        let fixture = try StoreFixture()
        let before = try await fixture.store.pageCacheSize
        let uuids = (0..<10).map { _ in UUID() }
        try await fixture.store.applyPull(
            Self.page(uuids.prefix(5).enumerated().map { Self.person($1, version: Int64($0 + 1), name: "P\($0)") }, cursor: "c1", hasMore: true),
            collections: ["people", "visits"])
        #expect(try await fixture.store.pageCacheSize == -32_768)
        try await fixture.store.applyPull(
            Self.page(uuids.suffix(5).enumerated().map { Self.person($1, version: Int64($0 + 6), name: "Q\($0)") }, cursor: "c2", hasMore: false),
            collections: ["people", "visits"])
        #expect(try await fixture.store.pageCacheSize == before)
        #expect(try await fixture.store.query(Person.self).count == 10)
    }
}
