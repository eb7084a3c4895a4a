import Foundation
import OutpostCore
package import OutpostSQLite

/// The `blobs` table: one row per attachment this device knows, whose
/// bytes are a file named by the hash (`BlobFolder`).
///
/// `upload` is NULL for a blob that came with someone else's record (never
/// this device's to send); `uploaded_bytes` is what the server was last
/// known to hold; `held` says whether the file is here; `last_used` orders
/// eviction (least recently used first).
package struct BlobTable {
    let connection: SQLiteConnection

    package init(connection: SQLiteConnection) { self.connection = connection }

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

    package static func create(in connection: SQLiteConnection) throws {
        try connection.execute(definition)
    }

    /// Stores made before the quick check hold `upload IN (…)`: the table
    /// is made again from `definition` with every row.
    package static func rebuildLegacyChecks(in connection: SQLiteConnection) throws {
        guard try TableRebuild.definition(of: "blobs", contains: uploadCheck.legacyText, in: connection) else { return }
        try TableRebuild.rebuild("blobs", create: definition, indexes: [], in: connection)
    }

    private static let columns = "sha256, size, content_type, upload, uploaded_bytes, attempts, failures, last_error, held"

    /// A row as `AttachmentQueue` reads it; nil when its hash or size is not valid.
    private static func row(_ sql: SQLiteRow) -> AttachmentQueue.Row? {
        guard let attachment = AttachedFile(sha256: sql.string(0), size: sql.int64(1), contentType: sql.string(2)) else { return nil }
        return AttachmentQueue.Row(
            attachment: attachment, upload: sql.optionalString(3), uploadedBytes: sql.int64(4), attempts: Int(sql.int64(5)),
            failures: Int(sql.int64(6)), lastError: sql.optionalString(7), held: sql.int64(8) != 0)
    }

    func row(_ sha: String) throws -> AttachmentQueue.Row? {
        try connection.first("SELECT \(Self.columns) FROM blobs WHERE sha256 = ?", [.text(sha)]) { Self.row($0) } ?? nil
    }

    /// Every row (those with an invalid hash or size left out).
    func all() throws -> [AttachmentQueue.Row] {
        try connection.query("SELECT \(Self.columns) FROM blobs") { Self.row($0) }.compactMap { $0 }
    }

    /// Blobs not uploaded yet, smallest first (nil for a row that cannot be read).
    func unfinished() throws -> [AttachmentQueue.Row?] {
        try connection.query(
            "SELECT \(Self.columns) FROM blobs WHERE upload IN ('waiting', 'uploading', 'failed') ORDER BY size, attached_at"
        ) { Self.row($0) }
    }

    /// The highest `last_used` given out.
    func lastUse() throws -> Int64 {
        try connection.first("SELECT max(last_used) FROM blobs") { $0.int64(0) } ?? 0
    }

    /// Bytes just stored in the folder, this device's to upload (see `AttachmentQueue.attach`).
    package func attach(_ attachment: AttachedFile, use: Int64, now: String) throws {
        try connection.run(
            """
            INSERT INTO blobs (sha256, size, content_type, upload, held, last_used, attached_at)
            VALUES (?, ?, ?, 'waiting', 1, ?, ?)
            ON CONFLICT (sha256) DO UPDATE SET
                held = 1, last_used = excluded.last_used, attached_at = excluded.attached_at,
                upload = CASE WHEN upload IN ('uploaded', 'uploading', 'waiting') THEN upload ELSE 'waiting' END,
                failures = CASE WHEN upload = 'failed' THEN 0 ELSE failures END,
                last_error = CASE WHEN upload = 'failed' THEN NULL ELSE last_error END
            """,
            [.text(attachment.sha256), .integer(attachment.size), .text(attachment.contentType), .integer(use), .text(now)])
    }

    /// Bytes downloaded for a record: held here, not this device's to upload.
    func cache(_ attachment: AttachedFile, use: Int64) throws {
        try connection.run(
            """
            INSERT INTO blobs (sha256, size, content_type, upload, held, last_used) VALUES (?, ?, ?, NULL, 1, ?)
            ON CONFLICT (sha256) DO UPDATE SET held = 1, last_used = excluded.last_used
            """, [.text(attachment.sha256), .integer(attachment.size), .text(attachment.contentType), .integer(use)])
    }

    func setLastUse(_ sha: String, _ use: Int64) throws {
        try connection.run("UPDATE blobs SET last_used = ? WHERE sha256 = ?", [.integer(use), .text(sha)])
    }

    /// The file is no longer on the device.
    package func markNotHeld(_ sha: String) throws {
        try connection.run("UPDATE blobs SET held = 0 WHERE sha256 = ?", [.text(sha)])
    }

    func remove(_ sha: String) throws {
        try connection.run("DELETE FROM blobs WHERE sha256 = ?", [.text(sha)])
    }

    func names() throws -> Set<String> {
        Set(try connection.query("SELECT sha256 FROM blobs") { $0.string(0) })
    }

    package func notUploaded() throws -> Set<String> {
        Set(try connection.query("SELECT sha256 FROM blobs WHERE upload IN ('waiting', 'uploading', 'failed')") { $0.string(0) })
    }

    package func anyNotUploaded() throws -> Bool {
        try connection.first("SELECT 1 FROM blobs WHERE upload IN ('waiting', 'uploading', 'failed') LIMIT 1") { _ in true } ?? false
    }

    /// A failed blob named by a new change waits to be uploaded again.
    func retryFailed(_ sha: String) throws {
        try connection.run("UPDATE blobs SET upload = 'waiting', failures = 0, last_error = NULL WHERE sha256 = ?", [.text(sha)])
    }

    func noteAttempt(_ sha: String) throws {
        try connection.run("UPDATE blobs SET attempts = attempts + 1 WHERE sha256 = ?", [.text(sha)])
    }

    /// The server holds the first `bytes` of an upload still going.
    package func noteProgress(_ sha: String, bytes: Int64) throws {
        try connection.run(
            "UPDATE blobs SET upload = 'uploading', uploaded_bytes = ? WHERE sha256 = ? AND upload IN ('waiting', 'uploading')",
            [.integer(bytes), .text(sha)])
    }

    package func markUploaded(_ sha: String) throws {
        try connection.run(
            "UPDATE blobs SET upload = 'uploaded', uploaded_bytes = size, last_error = NULL WHERE sha256 = ?", [.text(sha)])
    }

    /// One more failure, and `failed` once `budget` failures are reached.
    package func countFailure(_ sha: String, reason: String, budget: Int) throws {
        try connection.run(
            """
            UPDATE blobs SET failures = failures + 1, last_error = ?,
                upload = CASE WHEN failures + 1 >= ? THEN 'failed' ELSE upload END
            WHERE sha256 = ?
            """, [.text(reason), .integer(Int64(budget)), .text(sha)])
    }

    func markFailed(_ sha: String, reason: String) throws {
        try connection.run(
            "UPDATE blobs SET upload = 'failed', failures = failures + 1, last_error = ? WHERE sha256 = ?",
            [.text(reason), .text(sha)])
    }

    /// Uploaded again from the start: the server did not hold it.
    func requeue(_ sha: String) throws {
        try connection.run(
            """
            UPDATE blobs SET upload = 'waiting', uploaded_bytes = 0, failures = failures + 1,
                last_error = 'the server did not hold it' WHERE sha256 = ?
            """, [.text(sha)])
    }

    /// Bytes of the files on the device.
    package func heldBytes() throws -> Int64 {
        try connection.first("SELECT coalesce(sum(size), 0) FROM blobs WHERE held = 1") { $0.int64(0) } ?? 0
    }

    /// Files the server holds (or that came from it), least recently used first.
    package func evictable() throws -> [(sha: String, size: Int64)] {
        try connection.query(
            "SELECT sha256, size FROM blobs WHERE held = 1 AND (upload IS NULL OR upload = 'uploaded') ORDER BY last_used"
        ) { (sha: $0.string(0), size: $0.int64(1)) }
    }

    /// Per upload state: how many, their bytes, and the bytes the server holds.
    func forEachUploadState(_ body: (_ state: String, _ count: Int, _ bytes: Int64, _ uploaded: Int64) throws -> Void) throws {
        try connection.forEach(
            "SELECT upload, count(*), coalesce(sum(size), 0), coalesce(sum(uploaded_bytes), 0) FROM blobs WHERE upload IS NOT NULL GROUP BY upload"
        ) { row in try body(row.string(0), Int(row.int64(1)), row.int64(2), row.int64(3)) }
    }
}
