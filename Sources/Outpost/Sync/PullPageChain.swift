import Foundation
import OutpostCore

/// The pages of one pull, requested ahead of the store that writes them.
///
/// A page's request carries the cursor of the page before it, so requests
/// go out one after another; but a request need not wait until the page
/// before it is *stored*. Up to `depth` pages are requested and read ahead
/// while the store writes. With a single page ahead, every long write (a
/// WAL checkpoint copying megabytes, every few thousand rows of a first
/// download) left the network idle once that one page had arrived, and the
/// device then waited for each page after it: a fifth to a third of a
/// 235,613-record download was spent waiting for pages the server could
/// have sent during the checkpoints.
///
/// Only one request is ever on the wire, as before; what changes is how
/// many answers may wait, parsed, for the store (at most `depth` pages of
/// the pull's page size).
package struct PullPageChain<Page: Sendable> {
    package typealias Fetch = @Sendable (PullCursor?) async throws -> Page
    /// The cursor to ask for the page after this one, or nil after the last.
    package typealias Following = @Sendable (Page) -> PullCursor?

    private var ahead: [Task<Page?, any Error>] = []
    private let depth: Int
    private let fetch: Fetch
    private let following: Following

    /// Starts requesting the pages after `cursor` (all, from the start, when nil).
    package init(after cursor: PullCursor?, depth: Int, following: @escaping Following, fetch: @escaping Fetch) {
        precondition(depth >= 1, "a pull reads at least one page ahead")
        self.depth = depth
        self.fetch = fetch
        self.following = following
        ahead.append(Task { try await fetch(cursor) })
        extend()
    }

    /// The next page in order, or nil after the last one. A failed request
    /// fails here, in its page's turn; the pages after it are never requested.
    package mutating func next() async throws -> Page? {
        guard !ahead.isEmpty else { return nil }
        let head = ahead.removeFirst()
        extend()
        return try await head.value
    }

    /// Stops every request not yet answered (the cycle ended or failed).
    package func cancel() {
        for task in ahead { task.cancel() }
    }

    /// Chains requests up to `depth`: each waits for the answer before it
    /// and asks for the page after that answer's cursor, if there is one.
    private mutating func extend() {
        let fetch = self.fetch
        let following = self.following
        while ahead.count < depth, let previous = ahead.last {
            ahead.append(
                Task {
                    guard let page = try await previous.value, let cursor = following(page) else { return nil }
                    try Task.checkCancellation()
                    return try await fetch(cursor)
                })
        }
    }
}
