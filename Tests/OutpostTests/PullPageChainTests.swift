import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// A pull's pages are requested ahead of the store, one request at a time,
/// each with the cursor of the answer before it.
@Suite("Pull pages read ahead", .timeLimit(.minutes(2)))
struct PullPageChainTests {
    /// A page of a fake feed: its number, and whether another follows.
    struct Page: Sendable, Equatable {
        var number: Int
        var hasMore: Bool
    }

    /// A fake server of `pages` pages: answers page n+1 to cursor "n",
    /// logs every cursor asked for, and fails page `failing` when given.
    final class Feed: Sendable {
        let pages: Int
        let failing: Int?
        private let asked = Locked<[String?]>([])

        init(pages: Int, failing: Int? = nil) {
            self.pages = pages
            self.failing = failing
        }

        var cursorsAsked: [String?] { asked.current }

        func fetch(_ cursor: PullCursor?) async throws -> Page {
            asked.withLock { $0.append(cursor?.rawValue) }
            let number = (cursor.flatMap { Int($0.rawValue) } ?? 0) + 1
            if number == failing { throw SyncFailure.noAnswer }
            return Page(number: number, hasMore: number < pages)
        }

        func chain(depth: Int) -> PullPageChain<Page> {
            PullPageChain(
                after: nil, depth: depth, following: { $0.hasMore ? PullCursor(rawValue: String($0.number)) : nil },
                fetch: { try await self.fetch($0) })
        }
    }

    @Test func pagesComeInOrderEachAskedWithTheCursorBeforeItAndNoFurtherAheadThanTheDepth() async throws {
        let feed = Feed(pages: 10)
        var chain = feed.chain(depth: 3)
        defer { chain.cancel() }
        try await eventually("three pages asked for ahead") { feed.cursorsAsked.count == 3 }
        // Nothing is stored yet, and no fourth page is asked for meanwhile.
        try await Task.sleep(for: .milliseconds(50))
        #expect(feed.cursorsAsked == [nil, "1", "2"])

        var numbers: [Int] = []
        while let page = try await chain.next() { numbers.append(page.number) }
        #expect(numbers == Array(1...10))
        #expect(feed.cursorsAsked == [nil] + (1...9).map { String($0) }, "each page once, after the one before; none past the last")
        #expect(try await chain.next() == nil)
    }

    @Test func aFailedPageFailsInItsTurnAndNothingAfterItIsAskedFor() async throws {
        let feed = Feed(pages: 10, failing: 4)
        var chain = feed.chain(depth: 3)
        defer { chain.cancel() }
        for expected in 1...3 { #expect(try await chain.next()?.number == expected) }
        await #expect(throws: SyncFailure.noAnswer) { try await chain.next() }
        try await Task.sleep(for: .milliseconds(50))
        #expect(feed.cursorsAsked == [nil, "1", "2", "3"])
    }
}
