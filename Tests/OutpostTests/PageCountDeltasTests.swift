import Foundation
import OutpostCore
import OutpostSQLite
import OutpostTesting
import Testing

@testable import Outpost

/// A small pulled page moves the kept counts of live records by exactly
/// what it did, instead of leaving the table to be counted again (a scan of
/// every row, 60-100 ms at 235,000 records) at the next status read.
@Suite("Counts moved by small pages", .timeLimit(.minutes(3)))
struct PageCountDeltasTests {
    typealias Pages = FirstDownloadIndexTests

    /// A store holding `count` people, their count read once (so kept), and their uuids.
    static func downloaded(_ count: Int) async throws -> (StoreFixture, [UUID]) {
        let fixture = try StoreFixture()
        let uuids = (0..<count).map { _ in UUID() }
        try await fixture.store.applyPull(Pages.page(Pages.people(uuids[...], first: 1), cursor: "c0", hasMore: false), collections: Pages.collections)
        #expect(try await fixture.store.localCounts()["people"] == count)
        #expect(await fixture.store.liveCounts.known("people") == count)
        return (fixture, uuids)
    }

    @Test func aLivePageOfEveryKindOfChangeMovesTheCountExactly() async throws {
        let (fixture, uuids) = try await Self.downloaded(100)
        let store = fixture.store
        // A local edit waiting: the server's tombstone for it is kept out.
        try await store.update(in: "people", uuids[4], patch: ["name": .string("Mine")])
        let new = UUID()
        let changes: [PullChange] = [
            Pages.person(new, version: 500, name: "New"),
            Pages.person(new, version: 501, name: "New, again in the same page"),
            Pages.person(uuids[1], version: 502, name: "Edited"),
            Pages.person(uuids[2], version: 503, name: "", deleted: true),
            .removed(collection: "people", uuid: uuids[3]),
            Pages.person(uuids[4], version: 504, name: "", deleted: true),
            Pages.person(UUID(), version: 505, name: "", deleted: true),
        ]
        // Figures not read with it: a count left unknown would stay unknown.
        let (result, _) = try await store.applyLivePage(
            try Pages.page(changes, cursor: "c1", hasMore: false), collections: Pages.collections, readingFigures: false)
        #expect(result.keptLocal == 1)
        let rows = try FirstDownloadCountsTests.liveRows(fixture.path)
        #expect(rows == 99, "one new, one deleted, one removed; the local edit kept")
        #expect(await store.liveCounts.known("people") == rows, "moved exactly, not forgotten")
        #expect(try await store.localCounts()["people"] == rows)

        // A live page reading the figures in its transaction reads the moved count.
        let (_, figures) = try await store.applyLivePage(
            try Pages.page([Pages.person(UUID(), version: 506, name: "Live")], cursor: "c2", hasMore: false), collections: Pages.collections,
            readingFigures: true)
        #expect(figures?.counts?["people"] == 100)
        #expect(try FirstDownloadCountsTests.liveRows(fixture.path) == 100)
        // And a plain pull.
        try await store.applyPull(
            try Pages.page([Pages.person(uuids[5], version: 507, name: "", deleted: true)], cursor: "c3", hasMore: false),
            collections: Pages.collections)
        #expect(await store.liveCounts.known("people") == 99)
        #expect(try FirstDownloadCountsTests.liveRows(fixture.path) == 99)
    }

    /// A page larger than the limit leaves the count to be counted again
    /// once, at the next read.
    @Test func aLargePageLeavesTheCountToBeCountedAgain() async throws {
        let (fixture, _) = try await Self.downloaded(10)
        let store = fixture.store
        let more = (0...PageCountDeltas.largestPage).map { _ in UUID() }
        try await store.applyPull(try Pages.page(Pages.people(more[...], first: 100), cursor: "c1", hasMore: false), collections: Pages.collections)
        #expect(await store.liveCounts.known("people") == nil)
        #expect(try await store.localCounts()["people"] == 10 + more.count)
    }
}
