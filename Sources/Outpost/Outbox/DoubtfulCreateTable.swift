import Foundation
import OutpostSQLite

/// The `doubtful_creates` table: creates whose fate on the server this
/// database cannot know (see `DoubtfulCreates.swift` for what each row means).
enum DoubtfulCreateTable {
    static func create(in connection: SQLiteConnection) throws {
        try connection.execute(
            """
            CREATE TABLE doubtful_creates (
                collection          TEXT NOT NULL,
                record_uuid         TEXT NOT NULL,
                cancelled_after_seq INTEGER,
                PRIMARY KEY (collection, record_uuid)
            ) WITHOUT ROWID;
            """)
    }
}
