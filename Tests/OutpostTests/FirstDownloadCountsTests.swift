import Foundation
import OutpostCore
import OutpostSQLite
import OutpostTesting
import Testing

@testable import Outpost

/// A first download that filled a table with its uuid index off knows how
/// many records it left there: the status's counts at the cycle's end are
/// those, not a COUNT over the table the download just wrote.
@Suite("First download's counts", .timeLimit(.minutes(3)))
struct FirstDownloadCountsTests {
    typealias Pages = FirstDownloadIndexTests

    static func liveRows(_ path: String) throws -> Int {
        let file = try SQLiteConnection(path: path, readOnly: true)
        defer { file.close() }
        return try file.first("SELECT count(*) FROM people WHERE deleted = 0") { Int($0.int64(0)) } ?? -1
    }

    @Test func theLastPageLeavesTheCountOfWhatTheDownloadKept() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let uuids = (0..<400).map { _ in UUID() }.shuffled()
        try await store.applyPull(Pages.page(Pages.people(uuids[0..<200], first: 1), cursor: "c1", hasMore: true), collections: Pages.collections)
        #expect(try !Pages.hasUuidIndex(fixture.path))
        #expect(await store.liveCounts.known("people") == nil, "no count while pages are to come")
        // Repeats, a tombstone of a record appended before and one of a record never sent.
        try await store.applyPull(
            Pages.page(
                [Pages.person(uuids[3], version: 900, name: "Again"), Pages.person(uuids[7], version: 0, name: "", deleted: true)]
                    + Pages.people(uuids[200..<300], first: 201)
                    + [Pages.person(UUID(), version: 0, name: "", deleted: true), Pages.person(uuids[250], version: 901, name: "Twice")],
                cursor: "c2", hasMore: true),
            collections: Pages.collections)
        try await store.applyPull(
            Pages.page(Pages.people(uuids[300...], first: 301) + [Pages.person(uuids[9], version: 0, name: "", deleted: true)], cursor: "c3", hasMore: false),
            collections: Pages.collections)
        #expect(try Pages.hasUuidIndex(fixture.path))
        let rows = try Self.liveRows(fixture.path)
        #expect(rows == 398)
        #expect(await store.liveCounts.known("people") == rows, "known from the download, before any read")
        #expect(try await store.localCounts()["people"] == rows)
    }

    /// A download that stops before its last page builds its index and
    /// knows its count the same way; the pages after it are counted again.
    @Test func aDownloadCutShortKnowsItsCountAndTheRestIsCountedAgain() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let uuids = (0..<150).map { _ in UUID() }.shuffled()
        try await store.applyPull(
            Pages.page(Pages.people(uuids[0..<100], first: 1) + [Pages.person(uuids[2], version: 0, name: "", deleted: true)], cursor: "c1", hasMore: true),
            collections: Pages.collections)
        try await store.finishInterruptedDownload()
        #expect(try Pages.hasUuidIndex(fixture.path))
        #expect(await store.liveCounts.known("people") == 99)
        try await store.applyPull(Pages.page(Pages.people(uuids[100...], first: 101), cursor: "c2", hasMore: false), collections: Pages.collections)
        #expect(await store.liveCounts.known("people") == 149, "the rest went the usual way, into the index, and moved the count exactly")
        #expect(try await store.localCounts()["people"] == 149)
        #expect(try Self.liveRows(fixture.path) == 149)
    }

    /// A local write meanwhile makes the index and the download goes the
    /// usual way: its count is then read again, not taken from the download.
    @Test func aTableWrittenByAnythingElseIsCountedAgain() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let uuids = (0..<200).map { _ in UUID() }.shuffled()
        try await store.applyPull(Pages.page(Pages.people(uuids[0..<100], first: 1), cursor: "c1", hasMore: true), collections: Pages.collections)
        _ = try await store.create(Person(name: "Local"))
        try await store.applyPull(Pages.page(Pages.people(uuids[100...], first: 101), cursor: "c2", hasMore: false), collections: Pages.collections)
        #expect(await store.liveCounts.known("people") == nil)
        #expect(try await store.localCounts()["people"] == 201)
        #expect(try Self.liveRows(fixture.path) == 201)
    }

    /// A table written by something else after its last page of the
    /// download (the last pages held another collection only) is counted
    /// again too.
    @Test func aTableAbsentFromTheLastPagesAndWrittenMeanwhileIsCountedAgain() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let people = (0..<100).map { _ in UUID() }.shuffled()
        let visits = (0..<100).map { _ in UUID() }.shuffled()
        func visit(_ uuid: UUID, _ version: Int64) -> PullChange {
            .record(
                WireRecord(
                    collection: "visits", uuid: uuid, id: version, version: version, updatedAt: Pages.time, deleted: false, owner: "u-1",
                    team: "t-1", data: ["person": .string(people[0].wireText), "visited_at": .string("2026-12-06")]))
        }
        try await store.applyPull(
            Pages.page(Pages.people(people[...], first: 1) + visits[0..<50].enumerated().map { visit($1, Int64(200 + $0)) }, cursor: "c1", hasMore: true),
            collections: Pages.collections)
        _ = try await store.create(Person(name: "Local"))
        try await store.applyPull(
            Pages.page(visits[50...].enumerated().map { visit($1, Int64(300 + $0)) }, cursor: "c2", hasMore: false), collections: Pages.collections)
        #expect(await store.liveCounts.known("people") == nil, "written by a local create since its pages")
        #expect(await store.liveCounts.known("visits") == 100)
        #expect(try await store.localCounts()["people"] == 101)
        #expect(try Self.liveRows(fixture.path) == 101)
    }

    /// Uuids in key order keep the index and no map: counted as before.
    @Test func aDownloadInKeyOrderIsCountedAtTheEnd() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let uuids = (0..<200).map { _ in UUID() }.sorted { $0.wireText < $1.wireText }
        try await store.applyPull(Pages.page(Pages.people(uuids[0..<100], first: 1), cursor: "c1", hasMore: true), collections: Pages.collections)
        try await store.applyPull(Pages.page(Pages.people(uuids[100...], first: 101), cursor: "c2", hasMore: false), collections: Pages.collections)
        #expect(try await store.localCounts()["people"] == 200)
    }
}
