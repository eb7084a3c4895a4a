import Foundation

import OutpostCore
import OutpostTesting
import Testing

@testable import Outpost

/// A live page's status figures are read inside the page's own transaction
/// (no read transaction of their own): they show the page, and the counts
/// they leave known stay exact for the reads after.
@Suite("Live page figures", .timeLimit(.minutes(2)))
struct LivePageFiguresTests {
    let time = ServerTimestamp(rawValue: "2026-12-06T10:00:00.000001Z")

    func person(_ uuid: UUID, version: Int64, deleted: Bool = false) -> PullChange {
        .record(
            WireRecord(
                collection: "people", uuid: uuid, id: version, version: version, updatedAt: time, deleted: deleted, owner: "u-1",
                team: "t-1", data: ["name": .string("P\(version)")]))
    }

    func page(_ changes: [PullChange], cursor: String, at serverTime: ServerTimestamp? = nil) throws -> RawPullPage {
        try RawPullPage(
            PullResponse(changes: changes, cursor: PullCursor(rawValue: cursor), hasMore: false, serverTime: serverTime ?? time))
    }

    @Test func figuresShowThePageAndCountsStayExact() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let collections = store.syncedCollections
        let uuids = (0..<3).map { _ in UUID() }
        let first = try await store.applyLivePage(
            page([person(uuids[0], version: 1)], cursor: "c1"), collections: collections, readingFigures: true)
        #expect(first.0.applied == 1)
        let figures = try #require(first.1)
        #expect(figures.counts?["people"] == 1)
        #expect(figures.pullState?.cursor == PullCursor(rawValue: "c1"))
        #expect(figures.pullState?.lastSyncedAt["people"] == time)

        // Not asked: nothing read; the counts known are forgotten and read again.
        let later = ServerTimestamp(rawValue: "2026-12-06T10:00:01.000001Z")
        let second = try await store.applyLivePage(
            page([person(uuids[1], version: 2), person(uuids[2], version: 3)], cursor: "c2", at: later), collections: collections,
            readingFigures: false)
        #expect(second.1 == nil)
        #expect(try await store.localCounts()["people"] == 3)

        // A tombstone: the figures count what the page left.
        let third = try await store.applyLivePage(
            page([person(uuids[0], version: 4, deleted: true)], cursor: "c3", at: later), collections: collections, readingFigures: true)
        #expect(third.1?.counts?["people"] == 2)
        #expect(third.1?.pullState?.cursor == PullCursor(rawValue: "c3"))
        #expect(third.1?.pullState?.lastSyncedAt["people"] == later)
        #expect(try await store.localCounts()["people"] == 2)
        #expect(try await store.pullState(collections: collections).cursor == PullCursor(rawValue: "c3"))
    }

    @Test func theCollectionsAreWrittenOnlyWhenTheyChange() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        _ = try await store.applyLivePage(page([person(UUID(), version: 1)], cursor: "c1"), collections: ["people"], readingFigures: false)
        #expect(try await store.pullState(collections: ["people"]).cursor == PullCursor(rawValue: "c1"))
        // Another set of collections: its cursor is not the old one's, and
        // the page that brings it is stored under the new set.
        _ = try await store.applyLivePage(
            page([person(UUID(), version: 2)], cursor: "c2"), collections: store.syncedCollections, readingFigures: false)
        #expect(try await store.pullState(collections: ["people"]).cursor == nil)
        #expect(try await store.pullState(collections: store.syncedCollections).cursor == PullCursor(rawValue: "c2"))
    }
}
