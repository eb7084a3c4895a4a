import Foundation
import OutpostSQLite

/// The `blobs` table: one row per attachment this device knows, whose
/// bytes are a file named by the hash (`BlobFolder`).
///
/// `upload` is NULL for a blob that came with someone else's record (never
/// this device's to send); `uploaded_bytes` is what the server was last
/// known to hold; `held` says whether the file is here; `last_used` orders
/// eviction (least recently used first).
struct BlobTable {
    let connection: SQLiteConnection

    /// The upload state's constraint (`MembershipCheck`).
    static let uploadCheck = MembershipCheck(column: "upload", values: ["waiting", "uploading", "uploaded", "failed"])

    static let definition = """
        CREATE TABLE blobs (
            sha256         TEXT PRIMARY KEY,
            size           INTEGER NOT NULL,
            content_type   TEXT NOT NULL,
            upload         TEXT \(uploadCheck),
            uploaded_bytes INTEGER NOT NULL DEFAULT 0,
            attempts       INTEGER NOT NULL DEFAULT 0,
            failures       INTEGER NOT NULL DEFAULT 0,
            last_error     TEXT,
            held           INTEGER NOT NULL DEFAULT 1,
            last_used      INTEGER NOT NULL DEFAULT 0,
            attached_at    TEXT
        ) WITHOUT ROWID;
        """

    static func create(in connection: SQLiteConnection) throws {
        try connection.execute(definition)
    }

    /// Stores made before the quick check hold `upload IN (…)`: the table
    /// is made again from `definition` with every row.
    static func rebuildLegacyChecks(in connection: SQLiteConnection) throws {
        guard try TableRebuild.definition(of: "blobs", contains: uploadCheck.legacyText, in: connection) else { return }
        try TableRebuild.rebuild("blobs", create: definition, indexes: [], in: connection)
    }
}
