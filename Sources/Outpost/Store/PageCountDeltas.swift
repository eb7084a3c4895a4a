import OutpostCore

/// What a small page of pulled changes does to each kept count of live
/// records, exactly: the live rows of its records counted before it and
/// after it, in its transaction.
///
/// Otherwise a page forgets the counts of the collections it touched, and
/// the next status read counts the table again: 60-100 ms at 235,000
/// records, after every live page that reads the figures (up to five a
/// second while a team's changes stream in), on the store's queue, where
/// the person's own writes wait behind it. A page's records are found by
/// the uuid index, a few microseconds each.
struct PageCountDeltas {
    /// Pages with more changes than this leave the counts to be counted
    /// again once: a catch-up pull's page of thousands would look up every
    /// record twice for a count read once at the cycle's end.
    static let largestPage = 64

    /// Per collection whose count is kept: its records in the pages, and
    /// how many of them were live before.
    private var before: [String: (uuids: Set<String>, live: Int)] = [:]

    /// Nil when the pages are too large to count this way. Only collections
    /// whose count is kept are counted, never one a first download is
    /// filling (no uuid index yet) nor the catalogs (their own table).
    /// `liveRows` counts the live rows of some uuids of a collection.
    init?(
        _ pages: [RawPullPage], registered: Set<String>, appending: [String: AppendedRows], known: LiveCounts,
        liveRows: (String, Set<String>) throws -> Int
    ) throws {
        guard pages.reduce(0, { $0 + $1.changes.count }) <= Self.largestPage else { return nil }
        var uuids: [String: Set<String>] = [:]
        for page in pages {
            for change in page.changes
            where change.collection != "catalogs" && registered.contains(change.collection) && appending[change.collection] == nil
                && known.known(change.collection) != nil
            {
                uuids[change.collection, default: []].insert(page.string(change.uuid))
            }
        }
        for (collection, records) in uuids { before[collection] = (records, try liveRows(collection, records)) }
    }

    /// The change of each counted collection's live rows, read after the
    /// pages were applied (in the same transaction).
    func deltas(liveRows: (String, Set<String>) throws -> Int) throws -> [String: Int] {
        var deltas: [String: Int] = [:]
        for (collection, counted) in before { deltas[collection] = try liveRows(collection, counted.uuids) - counted.live }
        return deltas
    }
}
