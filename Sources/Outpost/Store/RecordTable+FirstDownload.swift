import Foundation
import OutpostCore
import OutpostSQLite

/// The collections a download is filling with no uuid index: an empty table
/// at a page with more to come, whose uuids arrive in no key order, has its
/// index dropped, its rows appended, and the index built from them in one
/// go with the last page. Putting ~235,000 uuids made elsewhere (UUIDv4)
/// into the index one by one, each at a random place, cost more CPU and
/// writes than sorting them once.
struct FirstDownloadKeys {
    /// By collection: the rows the download appended, while its index is off.
    private var appended: [String: AppendedRows] = [:]

    /// The collections of `pages` to fill with no index now, with their
    /// rows so far. A table written by anything else meanwhile has its index
    /// again (`RecordTable.ensureUuidIndex`) and goes the usual way.
    mutating func begin(
        _ pages: [RawPullPage], registered: Set<String>, hasMore: Bool, on connection: SQLiteConnection
    ) throws -> [String: AppendedRows] {
        var collections: Set<String> = []
        for page in pages {
            var previous = ""
            for change in page.changes where change.collection != previous {
                previous = change.collection
                collections.insert(previous)
            }
        }
        var filling: [String: AppendedRows] = [:]
        for collection in collections where registered.contains(collection) {
            let table = RecordTable(collection, connection)
            let indexed = try table.hasUuidIndex()
            if !indexed, let rows = appended[collection] {
                filling[collection] = rows
                continue
            }
            appended[collection] = nil
            // Uuids in key order go into the index at its end, which costs
            // less than sorting them all again at the end.
            if hasMore, try table.isEmpty(), !Self.keysAscend(in: pages, of: collection) {
                try table.dropUuidIndex()
                let rows = AppendedRows()
                appended[collection] = rows
                filling[collection] = rows
            } else if !indexed {
                try table.ensureUuidIndex()
            }
        }
        return filling
    }

    /// With the last page, in its transaction: every index put off is
    /// built. Returns each such table's live records: every row in it is one
    /// the download appended and still holds (deletes took theirs out of the
    /// map too), so the status needs no COUNT over the table it just wrote.
    @discardableResult
    mutating func finish(on connection: SQLiteConnection) throws -> [String: Int] {
        var live: [String: Int] = [:]
        // SQLite's sorter takes the page cache's size as its working memory:
        // in the download's 32 MB it sorts every uuid as one list, and in
        // runs of 2 MB, merged, it spends about a quarter less CPU
        // (docs/benchmarks.md, "Pages inflated in one call").
        let cache = appended.isEmpty ? nil : try DownloadPageCache.size(of: connection)
        if cache != nil { try connection.execute("PRAGMA cache_size = -\(Self.sortKibibytes)") }
        defer { if let cache { try? connection.execute("PRAGMA cache_size = \(cache)") } }
        for (collection, rows) in appended.sorted(by: { $0.key < $1.key }) {
            let table = RecordTable(collection, connection)
            // An index already there means something else wrote the table
            // since (a collection absent from the last pages is not checked
            // by `begin`): its rows are no longer only the map's.
            if try !table.hasUuidIndex() { live[collection] = rows.count }
            // Freed before SQLite's sort takes its memory: the peak stays that of the download.
            rows.removeAll()
            try table.ensureUuidIndex()
        }
        appended = [:]
        return live
    }

    /// The sorter's working memory for the index build, in KiB.
    static let sortKibibytes: Int64 = 2_048

    /// Whether some collection's uuid index is off now.
    var isFilling: Bool { !appended.isEmpty }

    /// A transaction that failed took its rows back: what is known of them
    /// goes, and the next page builds the index (or puts it off again while
    /// the table is still empty).
    mutating func forget() { appended = [:] }

    /// Whether a collection's uuids in these pages come in key order (at
    /// most one in eight lower than the one before: a few records made
    /// elsewhere among time-ordered keys still do).
    static func keysAscend(in pages: [RawPullPage], of collection: String) -> Bool {
        var pairs = 0
        var descending = 0
        for page in pages {
            page.withText { text in
                var previous: UnsafeBufferPointer<UInt8>?
                for change in page.changes where change.collection == collection {
                    let uuid = text.span(change.uuid)
                    if let before = previous {
                        pairs += 1
                        if uuid.lexicographicallyPrecedes(before) { descending += 1 }
                    }
                    previous = uuid
                }
            }
        }
        return descending * 8 <= pairs
    }
}
