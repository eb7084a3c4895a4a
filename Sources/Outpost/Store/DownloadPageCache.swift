import Foundation
import OutpostSQLite

/// SQLite's page cache while a download of many pages runs. Each page of a
/// download whose uuids arrive in no key order adds entries all over the
/// uuid index; with SQLite's default 2 MB cache every one of them read its
/// index page back from the file. While more pages follow, the cache holds
/// 32 MB (the uuid index of about 600,000 records); it goes back to what it
/// was once the last page is in. Checkpoints wait for the same end
/// (`SQLiteConnection.holdCheckpoints`): the download's pages are copied
/// from the WAL once, in the pause after it.
struct DownloadPageCache {
    /// The cache while a download runs, in KiB (`PRAGMA cache_size` takes
    /// negative numbers as KiB).
    static let kibibytes: Int64 = 32_768

    /// The cache size to go back to; nil while no download is under way.
    private var restoreTo: Int64?

    /// Whether a download of several pages is under way (its last page included).
    var isUnderWay: Bool { restoreTo != nil }

    /// Before a page is applied: a page with more to come raises the cache.
    mutating func pageArrives(hasMore: Bool, on connection: SQLiteConnection) throws {
        guard hasMore, restoreTo == nil else { return }
        restoreTo = try Self.size(of: connection)
        try connection.execute("PRAGMA cache_size = -\(Self.kibibytes)")
        connection.holdCheckpoints(true)
    }

    /// After the last page, or a download cut short: the cache goes back
    /// (SQLite frees what is over) and the WAL is checkpointed in the pause.
    mutating func downloadEnded(on connection: SQLiteConnection) throws {
        guard let size = restoreTo else { return }
        connection.holdCheckpoints(false)
        try connection.execute("PRAGMA cache_size = \(size)")
        restoreTo = nil
    }

    /// `PRAGMA cache_size` as SQLite reports it: pages, or KiB when negative.
    static func size(of connection: SQLiteConnection) throws -> Int64 {
        try connection.first("PRAGMA cache_size") { $0.int64(0) } ?? -2_000
    }
}

extension LocalStore {
    /// The connection's page cache now (`PRAGMA cache_size`), for tests.
    package var pageCacheSize: Int64 {
        get throws { try DownloadPageCache.size(of: connection) }
    }
}
