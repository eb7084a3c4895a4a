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

    /// A fake server whose answers name the next cursor in their headers
    /// (`early`) and whose bodies arrive only when released: the next page
    /// is asked for on the headers, before the body before it is whole.
    final class SlowBodies: Sendable {
        let pages: Int
        /// Cursors named in headers: page n names `named(n)` (a wrong one to test the check).
        let named: @Sendable (Int) -> String
        private let asked = Locked<[String?]>([])
        private let released = Locked<Int>(0)

        init(pages: Int, named: @escaping @Sendable (Int) -> String = { String($0) }) {
            self.pages = pages
            self.named = named
        }

        var cursorsAsked: [String?] { asked.current }
        func release(through page: Int) { released.withLock { $0 = max($0, page) } }

        func fetch(_ cursor: PullCursor?, early: @Sendable (PullCursor) -> Void) async throws -> Page {
            asked.withLock { $0.append(cursor?.rawValue) }
            let number = (cursor.flatMap { Int($0.rawValue) } ?? 0) + 1
            if number < pages { early(PullCursor(rawValue: named(number))) }
            try await eventually("page \(number)'s body released", timeout: .seconds(30)) { self.released.current >= number }
            return Page(number: number, hasMore: number < pages)
        }

        func chain(depth: Int) -> PullPageChain<Page> {
            PullPageChain(
                after: nil, depth: depth, following: { $0.hasMore ? PullCursor(rawValue: String($0.number)) : nil },
                earlyFetch: { try await self.fetch($0, early: $1) })
        }
    }

    @Test func theNextPageIsAskedForOnTheHeadersBeforeTheBodyBeforeItArrives() async throws {
        let feed = SlowBodies(pages: 5)
        var chain = feed.chain(depth: 3)
        defer { chain.cancel() }
        // No body has arrived, yet three requests are out.
        try await eventually("three pages asked for on headers alone") { feed.cursorsAsked.count == 3 }
        #expect(feed.cursorsAsked == [nil, "1", "2"])
        feed.release(through: 5)
        var numbers: [Int] = []
        while let page = try await chain.next() { numbers.append(page.number) }
        #expect(numbers == [1, 2, 3, 4, 5])
        #expect(feed.cursorsAsked == [nil, "1", "2", "3", "4"], "each page once; none past the last")
    }

    @Test func aPageAskedForWithACursorTheBodyDoesNotGiveIsAskedForAgain() async throws {
        // Page 2's headers name a cursor its body does not give.
        let feed = SlowBodies(pages: 4, named: { $0 == 2 ? "9" : String($0) })
        feed.release(through: 10)
        var chain = feed.chain(depth: 2)
        defer { chain.cancel() }
        var numbers: [Int] = []
        while let page = try await chain.next() { numbers.append(page.number) }
        #expect(numbers == [1, 2, 3, 4], "the body's cursor decides")
        #expect(feed.cursorsAsked.contains("9") && feed.cursorsAsked.filter { $0 == "2" }.count == 1)
    }

    /// A download stores the pages in hand once the next is not here yet:
    /// the chain tells which, without waiting.
    @Test func theChainTellsWhetherTheNextPageIsHere() async throws {
        let release = AsyncStream<Void>.makeStream()
        let asked = Locked(0)
        var chain = PullPageChain<Page>(
            after: nil, depth: 2, following: { $0.hasMore ? PullCursor(rawValue: String($0.number)) : nil },
            fetch: { cursor in
                let number = (cursor.flatMap { Int($0.rawValue) } ?? 0) + 1
                asked.withLock { $0 = number }
                // Page 2 waits for the test; pages 1 and 3 come at once.
                if number == 2 { for await _ in release.stream { break } }
                return Page(number: number, hasMore: number < 3)
            })
        defer { chain.cancel() }
        try await Self.waitUntilHere(chain, "the first page")
        #expect(try await chain.next()?.number == 1)
        try await eventually("page 2 is asked for") { asked.withLock { $0 } >= 2 }
        try await Task.sleep(for: .milliseconds(50))
        #expect(!chain.nextIsHere, "page 2 is still on its way")
        release.continuation.yield()
        try await Self.waitUntilHere(chain, "page 2")
        #expect(try await chain.next()?.number == 2)
        #expect(try await chain.next()?.number == 3)
        // The link after the last page ends without a request.
        try await Self.waitUntilHere(chain, "the end of the chain")
        #expect(try await chain.next() == nil)
    }

    /// Polls `nextIsHere` (a chain is not Sendable), failing after 30 s.
    static func waitUntilHere(_ chain: PullPageChain<Page>, _ what: String) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while !chain.nextIsHere {
            guard ContinuousClock.now < deadline else { throw WaitTimedOut(what + " is here", timeout: .seconds(30)) }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}
