import Foundation

/// Live (not deleted) records per collection, kept between reads.
///
/// Counting walks every page of a table (0.1 s at 235,000 records), and the
/// status reads the counts after every sync cycle — including the cycle each
/// local edit starts. So the counts are kept: local creates and deletes
/// adjust them exactly, and so does a small pulled page (`PageCountDeltas`);
/// anything else that can add or remove rows (a large pull page, a push's
/// deletes, conflicts and rejections, a re-download) forgets the
/// collection's count, and the next read counts it again.
struct LiveCounts {
    private var known: [String: Int] = [:]

    /// A collection's count, counted only when not known.
    mutating func value(_ collection: String, count: () throws -> Int) rethrows -> Int {
        if let value = known[collection] { return value }
        let value = try count()
        known[collection] = value
        return value
    }

    /// A collection's count if known, without counting.
    func known(_ collection: String) -> Int? { known[collection] }

    /// Applies exact changes of a committed transaction.
    mutating func adjust(_ deltas: [String: Int]) {
        for (collection, delta) in deltas where delta != 0 {
            if let value = known[collection] { known[collection] = value + delta }
        }
    }

    /// Counts known exactly without counting (a first download's rows,
    /// which it appended itself), replacing what was known.
    mutating func learn(_ counts: [String: Int]) {
        for (collection, value) in counts { known[collection] = value }
    }

    /// Drops counts that a change of unknown size touched.
    mutating func forget<Collections: Sequence<String>>(_ collections: Collections) {
        for collection in collections { known[collection] = nil }
    }
}
