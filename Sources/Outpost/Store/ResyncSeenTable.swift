import Foundation
import OutpostCore
package import OutpostSQLite

/// The `resync_seen` table: records seen during a full re-download (after
/// 410). Synced rows not seen by its end are gone from the server or the
/// scope (`RecordTable.removeSyncedNotSeen`).
package struct ResyncSeenTable {
    let connection: SQLiteConnection

    package init(connection: SQLiteConnection) { self.connection = connection }

    package static func create(in connection: SQLiteConnection) throws {
        try connection.execute(
            """
            -- Records seen during a full re-download (after 410): synced rows
            -- not seen by the end are gone from the server or the scope.
            CREATE TABLE resync_seen (
                collection TEXT NOT NULL,
                uuid       TEXT NOT NULL,
                PRIMARY KEY (collection, uuid)
            ) WITHOUT ROWID;
            """)
    }

    package func removeAll() throws {
        try connection.run("DELETE FROM resync_seen")
    }

    /// `uuid IN` this, with the collection bound as `?`: the records of one
    /// collection seen so far.
    static let seenInCollection = "SELECT uuid FROM resync_seen WHERE collection = ?"
}

/// Marks records seen while a page of a re-download is applied, through one
/// prepared statement for the whole page.
struct ResyncLedger {
    private let insert: SQLitePreparedStatement

    init(_ connection: SQLiteConnection) throws {
        insert = try connection.prepared("INSERT OR IGNORE INTO resync_seen (collection, uuid) VALUES (?, ?)")
    }

    func mark(_ change: RawChange, _ text: UnsafeBufferPointer<UInt8>) throws {
        try insert.bind(1, change.collection)
        try insert.bind(2, text: text.span(change.uuid))
        try insert.run()
    }
}
