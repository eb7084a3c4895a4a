import Foundation
import OutpostCore

/// The pages of one pull, requested ahead of the store that writes them.
///
/// A page's request carries the cursor of the page before it; but it need
/// not wait until the page before it is *stored*. Up to `depth` pages are
/// requested and read ahead while the store writes. With a single page
/// ahead, every long write (a WAL checkpoint copying megabytes, every few
/// thousand rows of a first download) left the network idle once that one
/// page had arrived, and the device then waited for each page after it: a
/// fifth to a third of a 235,613-record download was spent waiting for
/// pages the server could have sent during the checkpoints.
///
/// Nor need it wait for the page before it to *arrive*: a server names the
/// next page's cursor in the answer's headers (`Outpost-Next-Cursor`), and
/// the request for that page leaves then, while the body before it is still
/// on the way. On a link with a 50 ms round trip, a download of 236 pages
/// asked one after another waited 11.8 s on round trips alone. The cursor a
/// page's body gives is still the one that counts: a page asked for with
/// another is asked for again.
package struct PullPageChain<Page: Sendable> {
    /// Fetches the page after a cursor; tells `early` the next page's cursor
    /// if the answer names it before its body is whole.
    package typealias EarlyFetch = @Sendable (PullCursor?, _ early: @escaping @Sendable (PullCursor) -> Void) async throws -> Page
    package typealias Fetch = @Sendable (PullCursor?) async throws -> Page
    /// The cursor to ask for the page after this one, or nil after the last.
    package typealias Following = @Sendable (Page) -> PullCursor?

    private struct Link {
        let task: Task<Page?, any Error>
        /// The next page's cursor, as soon as this page's answer names it.
        let next: EarlyCursor
        /// Set once the request has ended (answered, failed or cancelled).
        let ended: Locked<Bool>

        /// A request run by `request`, which offers the next page's cursor
        /// to the `EarlyCursor` it is given; once it ends, however it ends,
        /// that cursor is closed and the link says it ended.
        static func starting(_ request: @escaping @Sendable (EarlyCursor) async throws -> Page?) -> Link {
            let next = EarlyCursor()
            let ended = Locked(false)
            let task = Task {
                defer {
                    next.close()
                    ended.withLock { $0 = true }
                }
                return try await request(next)
            }
            return Link(task: task, next: next, ended: ended)
        }
    }

    private var ahead: [Link] = []
    private let depth: Int
    private let fetch: EarlyFetch
    private let following: Following

    /// Starts requesting the pages after `cursor` (all, from the start, when nil).
    package init(after cursor: PullCursor?, depth: Int, following: @escaping Following, fetch: @escaping Fetch) {
        self.init(after: cursor, depth: depth, following: following, earlyFetch: { cursor, _ in try await fetch(cursor) })
    }

    /// Starts requesting the pages after `cursor`; each page's request
    /// leaves as soon as the answer before it names its cursor.
    package init(after cursor: PullCursor?, depth: Int, following: @escaping Following, earlyFetch: @escaping EarlyFetch) {
        precondition(depth >= 1, "a pull reads at least one page ahead")
        self.depth = depth
        self.fetch = earlyFetch
        self.following = following
        ahead.append(Link.starting { next in try await earlyFetch(cursor) { next.offer($0) } })
        extend()
    }

    /// The next page in order, or nil after the last one. A failed request
    /// fails here, in its page's turn.
    package mutating func next() async throws -> Page? {
        guard !ahead.isEmpty else { return nil }
        let head = ahead.removeFirst()
        extend()
        // A cancelled cycle (stopped, or cut at a background deadline) ends its request now, not at its timeout.
        return try await withTaskCancellationHandler { try await head.task.value } onCancel: { head.task.cancel() }
    }

    /// Whether the next page is already here (or its request already
    /// failed): `next()` would not wait for the network.
    package var nextIsHere: Bool {
        guard let head = ahead.first else { return true }
        return head.ended.withLock { $0 }
    }

    /// Stops every request not yet answered (the cycle ended or failed).
    package func cancel() {
        for link in ahead { link.task.cancel() }
    }

    /// Chains requests up to `depth`: each starts on the cursor the answer
    /// before it names in its headers, or else once that answer is whole.
    private mutating func extend() {
        let fetch = self.fetch
        let following = self.following
        while ahead.count < depth, let previous = ahead.last {
            ahead.append(
                Link.starting { next in
                    let early = await previous.next.value()
                    try Task.checkCancellation()
                    if let early {
                        let page = try await fetch(early) { next.offer($0) }
                        // The body's cursor decides: asked with another, ask again.
                        guard let previousPage = try await previous.task.value, let cursor = following(previousPage) else {
                            return nil
                        }
                        if cursor == early { return page }
                        try Task.checkCancellation()
                        return try await fetch(cursor) { next.offer($0) }
                    }
                    guard let page = try await previous.task.value, let cursor = following(page) else { return nil }
                    try Task.checkCancellation()
                    return try await fetch(cursor) { next.offer($0) }
                })
        }
    }
}

/// A cursor told once by an answer's headers, or nothing once the request
/// ended without one; waited for by the request after it.
final class EarlyCursor: Sendable {
    private struct State {
        var settled = false
        var cursor: PullCursor?
        var waiters: [CheckedContinuation<PullCursor?, Never>] = []
    }

    private let state = Locked(State())

    /// The first cursor offered counts; later ones are ignored.
    func offer(_ cursor: PullCursor) { settle(cursor) }

    /// The request ended: a waiter with no cursor yet gets nil.
    func close() { settle(nil) }

    private func settle(_ cursor: PullCursor?) {
        let waiters = state.withLock { state -> [CheckedContinuation<PullCursor?, Never>] in
            guard !state.settled else { return [] }
            state.settled = true
            state.cursor = cursor
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: cursor) }
    }

    /// The cursor once told, or nil when the request ended without one.
    func value() async -> PullCursor? {
        await withCheckedContinuation { continuation in
            let settled = state.withLock { state -> PullCursor?? in
                if state.settled { return .some(state.cursor) }
                state.waiters.append(continuation)
                return .none
            }
            if let settled { continuation.resume(returning: settled) }
        }
    }
}
