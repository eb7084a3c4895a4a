import Foundation
import OutpostCore
import OutpostSQLite
import OutpostTesting
import Testing

@testable import Outpost

/// A first download into an empty table appends its rows with the uuid
/// index off and builds the index with the last page; anything else that
/// writes the table, or the store opening after a cut, makes it first.
@Suite("First download with the uuid index off", .timeLimit(.minutes(3)))
struct FirstDownloadIndexTests {
    static let time = ServerTimestamp(rawValue: "2026-12-06T10:00:00.000000Z")
    static let collections = ["people", "visits"]

    static func person(_ uuid: UUID, version: Int64, name: String, deleted: Bool = false) -> PullChange {
        .record(
            WireRecord(
                collection: "people", uuid: uuid, id: version, version: version, updatedAt: time, deleted: deleted, owner: "u-1",
                team: "t-1", data: deleted ? nil : ["name": .string(name)]))
    }

    static func page(_ changes: [PullChange], cursor: String, hasMore: Bool) throws -> RawPullPage {
        try RawPullPage(PullResponse(changes: changes, cursor: PullCursor(rawValue: cursor), hasMore: hasMore, serverTime: time))
    }

    /// New records, versions from `first` on.
    static func people(_ uuids: ArraySlice<UUID>, first: Int64, prefix: String = "P") -> [PullChange] {
        uuids.enumerated().map { person($1, version: first + Int64($0), name: "\(prefix)\(uuids.startIndex + $0)") }
    }

    /// Whether the file holds the people table's uuid index now (read by a
    /// connection of its own, as a crash would leave the file).
    static func hasUuidIndex(_ path: String) throws -> Bool {
        let file = try SQLiteConnection(path: path, readOnly: true)
        defer { file.close() }
        return try file.first("SELECT 1 FROM sqlite_schema WHERE type = 'index' AND name = 'people_uuid_key'") { _ in true } ?? false
    }

    static func rowCount(_ path: String) throws -> Int64 {
        let file = try SQLiteConnection(path: path, readOnly: true)
        defer { file.close() }
        return try file.first("SELECT count(*) FROM people") { $0.int64(0) } ?? -1
    }

    /// A uuid already held cannot go in twice.
    static func expectUniqueUuids(_ path: String, holding uuid: UUID) throws {
        let file = try SQLiteConnection(path: path)
        defer { file.close() }
        #expect(throws: SQLiteError.self) {
            try file.run("INSERT INTO people (uuid, sync_state, data) VALUES (?, 'synced', '{}')", [.text(uuid.wireText)])
        }
    }

    @Test func theIndexIsOffWhileTheDownloadRunsAndBuiltWithItsLastPage() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let uuids = (0..<300).map { _ in UUID() }.shuffled()
        let first = try await store.applyPull(Self.page(Self.people(uuids[0..<150], first: 1), cursor: "c1", hasMore: true), collections: Self.collections)
        #expect(first.applied == 150)
        #expect(try !Self.hasUuidIndex(fixture.path), "a first download appends with no uuid index")
        // Reads stay right while the index is off.
        #expect(try await store.get(Person.self, uuids[77])?.value.name == "P77")
        #expect(try await store.query(Person.self).count == 150)
        #expect(try await store.query(Person.self, orderBy: [.field("name")], limit: 3).map(\.value.name) == ["P0", "P1", "P10"])

        let last = try await store.applyPull(Self.page(Self.people(uuids[150...], first: 151), cursor: "c2", hasMore: false), collections: Self.collections)
        #expect(last.applied == 150)
        #expect(try Self.hasUuidIndex(fixture.path), "the last page builds the index")
        #expect(try await store.query(Person.self).count == 300)
        #expect(try await store.get(Person.self, uuids[299])?.value.name == "P299")
        try Self.expectUniqueUuids(fixture.path, holding: uuids[5])
        #expect(try await store.pullState(collections: Self.collections).cursor == PullCursor(rawValue: "c2"))
    }

    /// Each page's records go into the table in key order while the index is
    /// off (so the index's sort at the end merges sorted runs): rowid order
    /// within a page is uuid order, and the records are the page's.
    @Test func aPageInNoKeyOrderIsAppendedInKeyOrder() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let uuids = (0..<300).map { _ in UUID() }.shuffled()
        try await store.applyPull(Self.page(Self.people(uuids[0..<200], first: 1), cursor: "c1", hasMore: true), collections: Self.collections)
        #expect(try !Self.hasUuidIndex(fixture.path))
        let file = try SQLiteConnection(path: fixture.path, readOnly: true)
        defer { file.close() }
        let stored = try file.query("SELECT uuid FROM people ORDER BY rowid") { $0.string(0) }
        #expect(stored == uuids[0..<200].map(\.wireText).sorted(), "one page's rows appended in uuid order")
        try await store.applyPull(Self.page(Self.people(uuids[200...], first: 201), cursor: "c2", hasMore: false), collections: Self.collections)
        let all = try file.query("SELECT uuid FROM people ORDER BY rowid") { $0.string(0) }
        #expect(Array(all.prefix(200)) == stored, "a later page goes after the rows before it")
        #expect(Array(all.dropFirst(200)) == uuids[200...].map(\.wireText).sorted())
        #expect(try await store.get(Person.self, uuids[250])?.value.name == "P250")
    }

    /// Uuids in key order go into the index at its end as they come: the
    /// index stays, and is not sorted again at the end.
    @Test func uuidsInKeyOrderKeepTheIndex() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let uuids = (0..<200).map { _ in UUID() }.sorted { $0.wireText < $1.wireText }
        try await store.applyPull(Self.page(Self.people(uuids[0..<100], first: 1), cursor: "c1", hasMore: true), collections: Self.collections)
        #expect(try Self.hasUuidIndex(fixture.path), "in key order the index stays")
        try await store.applyPull(Self.page(Self.people(uuids[100...], first: 101), cursor: "c2", hasMore: false), collections: Self.collections)
        #expect(try await store.query(Person.self).count == 200)
        #expect(FirstDownloadKeys.keysAscend(in: [try Self.page(Self.people(uuids[0..<80], first: 1), cursor: "c", hasMore: true)], of: "people"))
        #expect(!FirstDownloadKeys.keysAscend(in: [try Self.page(Self.people(uuids[0..<80].reversed()[...], first: 1), cursor: "c", hasMore: true)], of: "people"))
    }

    /// The map keeps uuids in the protocol's spelling as their 16 bytes and
    /// any other text apart; a uuid claimed once is found again.
    @Test func theMapTellsEachUuidApartAndFindsARepeat() {
        let rows = AppendedRows()
        let uuids = (0..<500).map { _ in UUID().wireText }
        func claim(_ text: String, _ rowid: Int64) -> Int64? {
            Array(text.utf8).withUnsafeBufferPointer { rows.claim($0, as: rowid) }
        }
        for (offset, uuid) in uuids.enumerated() { #expect(claim(uuid, Int64(offset + 1)) == nil) }
        #expect(claim(uuids[42], 9_999) == 43, "a repeat finds its row and keeps it")
        #expect(Array(uuids[7].utf8).withUnsafeBufferPointer { AppendedRows.PackedKey($0) } != nil)
        #expect(Array(uuids[7].uppercased().utf8).withUnsafeBufferPointer { AppendedRows.PackedKey($0) } == nil)
        #expect(claim(uuids[7].uppercased(), 600) == nil, "other spellings are other text")
        #expect(claim(uuids[7].uppercased(), 601) == 600)
        #expect(claim("not-a-uuid", 700) == nil)
        #expect(rows.count == 502)
    }

    /// The open-addressed table behind the map: it grows past its first
    /// size keeping every rowid, a removed uuid is gone until claimed
    /// again, and `set` overwrites.
    @Test func theUuidTableGrowsRemovesAndOverwrites() {
        let table = UuidRowids()
        let keys = (0..<5_000).map { index in AppendedRows.PackedKey(high: UInt64.random(in: .min ... .max), low: UInt64(index)) }
        for (offset, key) in keys.enumerated() { #expect(table.claim(key, as: Int64(offset + 1)) == nil) }
        #expect(table.count == 5_000)
        #expect(keys.enumerated().allSatisfy { table.rowid($1) == Int64($0 + 1) }, "every rowid kept through the growth")
        table.remove(keys[10])
        #expect(table.rowid(keys[10]) == nil)
        #expect(table.rowid(keys[11]) == 12, "a neighbour is still found past the removed one")
        #expect(table.count == 4_999)
        #expect(table.claim(keys[10], as: 9_000) == nil, "a removed uuid claims anew")
        #expect(table.claim(keys[10], as: 9_001) == 9_000)
        table.set(keys[20], 7)
        #expect(table.rowid(keys[20]) == 7)
        #expect(table.rowid(AppendedRows.PackedKey(high: 1, low: 1)) == nil)
        // Keys that differ only in their top bits still spread.
        let close = UuidRowids()
        for top in 0..<4_096 { _ = close.claim(AppendedRows.PackedKey(high: UInt64(top) << 52, low: UInt64(top) << 52), as: Int64(top + 1)) }
        #expect((0..<4_096).allSatisfy { close.rowid(AppendedRows.PackedKey(high: UInt64($0) << 52, low: UInt64($0) << 52)) == Int64($0 + 1) })
    }

    /// A record changed while the download runs comes again in a later page:
    /// the newer version replaces the row appended before, an older one is
    /// left out, a tombstone deletes it, and one record twice in the same
    /// run of 64 keeps its newer version.
    @Test func aRecordRepeatedAcrossPagesKeepsOneRowWithItsNewestVersion() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let uuids = (0..<200).map { _ in UUID() }
        try await store.applyPulls(
            [
                Self.page(Self.people(uuids[0..<100], first: 1), cursor: "c1", hasMore: true),
                Self.page(
                    [Self.person(uuids[3], version: 300, name: "Newer")] + Self.people(uuids[100..<130], first: 101)
                        + [Self.person(uuids[3], version: 301, name: "Newest"), Self.person(uuids[4], version: 302, name: "Four")],
                    cursor: "c2", hasMore: true),
            ], collections: Self.collections)
        #expect(try !Self.hasUuidIndex(fixture.path))
        let middle = try await store.applyPull(
            Self.page(
                [
                    Self.person(uuids[3], version: 299, name: "Older"), Self.person(uuids[5], version: 0, name: "", deleted: true),
                    Self.person(uuids[120], version: 400, name: "Changed"),
                ] + Self.people(uuids[130..<190], first: 131), cursor: "c3", hasMore: true),
            collections: Self.collections)
        #expect(middle.applied == 61, "an older version is no write")
        #expect(middle.deleted == 1)
        try await store.applyPull(
            Self.page(Self.people(uuids[190...], first: 191) + [Self.person(uuids[6], version: 500, name: "Six")], cursor: "c4", hasMore: false),
            collections: Self.collections)
        #expect(try Self.hasUuidIndex(fixture.path))
        #expect(try Self.rowCount(fixture.path) == 199, "one row per record, the deleted one gone")
        #expect(try await store.get(Person.self, uuids[3])?.value.name == "Newest")
        #expect(try await store.get(Person.self, uuids[4])?.value.name == "Four")
        #expect(try await store.get(Person.self, uuids[5]) == nil)
        #expect(try await store.get(Person.self, uuids[6])?.value.name == "Six")
        #expect(try await store.get(Person.self, uuids[120])?.value.name == "Changed")
        #expect(try await store.get(Person.self, uuids[199])?.value.name == "P199")
    }

    /// A local write while the index is off makes it first: a create's uuid
    /// stays unique, an edit is kept over the server's next copy, a delete
    /// is queued; the download goes on the usual way.
    @Test func localWritesDuringTheDownloadMakeTheIndexAndStayRight() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let uuids = (0..<150).map { _ in UUID() }
        try await store.applyPull(Self.page(Self.people(uuids[0..<50], first: 1), cursor: "c1", hasMore: true), collections: Self.collections)
        #expect(try !Self.hasUuidIndex(fixture.path))

        let created = try await store.create(Person(name: "Local"))
        #expect(try Self.hasUuidIndex(fixture.path), "a local write makes the index first")
        await #expect(throws: StoreError.self) { try await store.create(Person(name: "Again"), uuid: uuids[1]) }
        try await store.update(Person.self, uuids[2]) { $0.name = "Edited here" }
        try await store.delete(Person.self, uuids[3])

        let next = try await store.applyPull(
            Self.page(
                [Self.person(uuids[2], version: 200, name: "Server edit")] + Self.people(uuids[50..<100], first: 51), cursor: "c2",
                hasMore: true), collections: Self.collections)
        #expect(next.keptLocal == 1, "the local edit is not overwritten")
        #expect(try Self.hasUuidIndex(fixture.path), "a table holding rows is not emptied of its index again")
        try await store.applyPull(Self.page(Self.people(uuids[100...], first: 101), cursor: "c3", hasMore: false), collections: Self.collections)
        #expect(try await store.get(Person.self, uuids[2])?.value.name == "Edited here")
        #expect(try await store.get(Person.self, uuids[3]) == nil)
        #expect(try await store.get(Person.self, created)?.value.name == "Local")
        #expect(try await store.query(Person.self).count == 150, "150 downloaded, one made here, one deleted here")
        #expect(try Self.rowCount(fixture.path) == 151)
    }

    /// A download cut after some pages (the app killed, the power gone)
    /// leaves a table with no uuid index: the store makes it when it opens.
    @Test func aDownloadCutMidwayLeavesAStoreThatOpensWithItsIndex() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let uuids = (0..<120).map { _ in UUID() }
        let store = try LocalStore(path: path, collections: StoreFixture.collections)
        try await store.applyPull(Self.page(Self.people(uuids[0..<80], first: 1), cursor: "c1", hasMore: true), collections: Self.collections)
        await store.close()
        #expect(try !Self.hasUuidIndex(path))

        let reopened = try LocalStore(path: path, collections: StoreFixture.collections)
        #expect(try Self.hasUuidIndex(path), "opening makes the index the download left out")
        try Self.expectUniqueUuids(path, holding: uuids[10])
        #expect(try await reopened.get(Person.self, uuids[10])?.value.name == "P10")
        // The download goes on from its cursor, the usual way.
        #expect(try await reopened.pullState(collections: Self.collections).cursor == PullCursor(rawValue: "c1"))
        try await reopened.applyPull(
            Self.page([Self.person(uuids[10], version: 90, name: "Newer")] + Self.people(uuids[80...], first: 81), cursor: "c2", hasMore: false),
            collections: Self.collections)
        #expect(try await reopened.query(Person.self).count == 120)
        #expect(try await reopened.get(Person.self, uuids[10])?.value.name == "Newer")
        await reopened.close()
    }

    /// A download that stopped with the store still open (the network
    /// gone mid-way) builds its index at once; the rest of the download,
    /// when it resumes, goes into the index.
    @Test func aDownloadThatStopsBuildsItsIndexAndResumesIntoIt() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let uuids = (0..<120).map { _ in UUID() }
        try await store.applyPull(Self.page(Self.people(uuids[0..<80], first: 1), cursor: "c1", hasMore: true), collections: Self.collections)
        #expect(try !Self.hasUuidIndex(fixture.path))
        try await store.finishInterruptedDownload()
        #expect(try Self.hasUuidIndex(fixture.path), "the download stopped: the index is built now")
        try Self.expectUniqueUuids(fixture.path, holding: uuids[5])
        try await store.finishInterruptedDownload()
        try await store.applyPull(
            Self.page([Self.person(uuids[5], version: 90, name: "Newer")] + Self.people(uuids[80...], first: 81), cursor: "c2", hasMore: false),
            collections: Self.collections)
        #expect(try Self.rowCount(fixture.path) == 120)
        #expect(try await store.get(Person.self, uuids[5])?.value.name == "Newer")
    }

    /// Observers see the records of every page as it is stored, and a
    /// record of the last page once the index is built.
    @Test func observersSeeTheRecordsAsTheyArrive() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let uuids = (0..<100).map { _ in UUID() }
        let counts = await store.observeCount(Person.self)
        let one = await store.observe(Person.self, uuids[99])
        let watcher = Task {
            var seen: [Int] = []
            for try await count in counts {
                seen.append(count)
                if count == 100 { break }
            }
            return seen
        }
        let record = Task {
            for try await value in one where value != nil { return value?.value.name }
            return nil
        }
        try await store.applyPull(Self.page(Self.people(uuids[0..<60], first: 1), cursor: "c1", hasMore: true), collections: Self.collections)
        try await store.applyPull(Self.page(Self.people(uuids[60...], first: 61), cursor: "c2", hasMore: false), collections: Self.collections)
        let seen = try await watcher.value(within: .seconds(30), "the observed count to reach the download's 100 records")
        #expect(seen.last == 100 && seen == seen.sorted(), "counts only grow, up to every record: \(seen)")
        #expect(try await record.value(within: .seconds(30), "the observed record of the last page") == "P99")
    }

    /// The same path in a store that seals every record.
    @Test func aSealedStoreDownloadsTheSameWay() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("sealed.sqlite")
        let key = AESGCMCipher.makeKey()
        let store = try LocalStore(path: path, collections: StoreFixture.collections, cipher: try AESGCMCipher(key: key))
        let uuids = (0..<140).map { _ in UUID() }
        try await store.applyPull(Self.page(Self.people(uuids[0..<70], first: 1), cursor: "c1", hasMore: true), collections: Self.collections)
        #expect(try !Self.hasUuidIndex(path))
        try await store.applyPull(
            Self.page(Self.people(uuids[70...], first: 71) + [Self.person(uuids[0], version: 999, name: "Resealed")], cursor: "c2", hasMore: false),
            collections: Self.collections)
        #expect(try Self.hasUuidIndex(path))
        #expect(try await store.get(Person.self, uuids[0])?.value.name == "Resealed")
        #expect(try await store.query(Person.self).count == 140)
        await store.close()
    }
}
