import Foundation
import OutpostCore

/// Pages of a first download held in memory until they are stored together,
/// in one transaction (`LocalStore.applyPulls`).
///
/// Uuids made elsewhere (UUIDv4) arrive in no key order, and every commit
/// of 5,000 of them rewrote most leaves of the uuid index: fewer, larger
/// commits write far less. The pages wait only while the next one is
/// already here, and never past the bounds, so the store is never idle
/// while pages wait, no transaction waits for the network, and progress
/// and observers see records arrive at most one batch late.
struct DownloadBatch {
    /// Records held at most before they are stored.
    let maxRecords: Int
    /// Page bytes held at most before they are stored (memory on a phone).
    let maxBytes: Int

    private(set) var pages: [RawPullPage] = []
    private(set) var records = 0
    private(set) var bytes = 0

    init(maxRecords: Int = 25_000, maxBytes: Int = 24 << 20) {
        self.maxRecords = maxRecords
        self.maxBytes = maxBytes
    }

    var isEmpty: Bool { pages.isEmpty }

    mutating func add(_ page: RawPullPage) {
        pages.append(page)
        records += page.changes.count
        bytes += page.text.count
    }

    /// Whether what is held must be stored now: the last page is in, a
    /// bound is reached, or the next page is not here yet (waiting for it
    /// with pages in hand would leave the store idle and the records unseen).
    func isDue(nextIsHere: Bool) -> Bool {
        guard let last = pages.last else { return false }
        return !last.hasMore || !nextIsHere || records >= maxRecords || bytes >= maxBytes
    }

    /// The pages held, in order; the batch is empty after.
    mutating func take() -> [RawPullPage] {
        defer { self = DownloadBatch(maxRecords: maxRecords, maxBytes: maxBytes) }
        return pages
    }
}
