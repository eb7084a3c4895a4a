import Foundation
import OutpostCore
import OutpostSQLite

/// The attachments this device knows (`blobs` table) beside their files:
/// what waits to be uploaded and how far each upload got, what may be
/// evicted, and what the status counts.
///
/// Runs on the store's serial owner, inside the store's transactions when
/// called from one (it never opens its own).
///
/// The lifecycle of an attachment made here: `waiting` (attached, bytes in
/// the folder) → `uploading` (the server holds `uploaded_bytes`) →
/// `uploaded`, or `failed` with the reason when the server refused it for
/// good. A record's change that names it is sent only once it is uploaded.
final class AttachmentQueue {
    let connection: SQLiteConnection
    let folder: BlobFolder
    let tables: RecordTables
    let collections: [String]
    /// Blobs attached by this process: their record may not be written yet,
    /// so they are never taken for leftovers of a crash.
    var attachedHere: Set<String> = []
    /// A counter for `last_used`, continued from the table.
    private var useClock: Int64?

    init(connection: SQLiteConnection, folder: BlobFolder, tables: RecordTables, collections: [String]) {
        self.connection = connection
        self.folder = folder
        self.tables = tables
        self.collections = collections
    }

    struct Row: Sendable, Equatable {
        var attachment: AttachedFile
        var upload: String?
        var uploadedBytes: Int64
        var attempts: Int
        var failures: Int
        var lastError: String?
        var held: Bool
    }

    private static let columns = "sha256, size, content_type, upload, uploaded_bytes, attempts, failures, last_error, held"

    private func row(_ sql: SQLiteRow) -> Row? {
        guard let attachment = AttachedFile(sha256: sql.string(0), size: sql.int64(1), contentType: sql.string(2)) else { return nil }
        return Row(
            attachment: attachment, upload: sql.optionalString(3), uploadedBytes: sql.int64(4), attempts: Int(sql.int64(5)),
            failures: Int(sql.int64(6)), lastError: sql.optionalString(7), held: sql.int64(8) != 0)
    }

    func row(_ sha: String) throws -> Row? {
        try connection.first("SELECT \(Self.columns) FROM blobs WHERE sha256 = ?", [.text(sha)]) { row($0) } ?? nil
    }

    private func nextUse() throws -> Int64 {
        let current = try useClock ?? connection.first("SELECT max(last_used) FROM blobs") { $0.int64(0) } ?? 0
        useClock = current + 1
        return current + 1
    }

    // MARK: Attaching and caching

    /// Records bytes just stored in the folder as this device's to upload.
    /// Attaching bytes the device already knows keeps what is known of them:
    /// an uploaded blob stays uploaded; one that came with someone else's
    /// record, or failed, is this device's to upload now (the server lets a
    /// record name only a blob its writer uploaded).
    func attach(_ attachment: AttachedFile, now: String) throws {
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
            [.text(attachment.sha256), .integer(attachment.size), .text(attachment.contentType), .integer(try nextUse()), .text(now)])
        attachedHere.insert(attachment.sha256)
    }

    /// Bytes downloaded for a record: held here, not this device's to upload.
    func cached(_ attachment: AttachedFile) throws {
        try connection.run(
            """
            INSERT INTO blobs (sha256, size, content_type, upload, held, last_used) VALUES (?, ?, ?, NULL, 1, ?)
            ON CONFLICT (sha256) DO UPDATE SET held = 1, last_used = excluded.last_used
            """, [.text(attachment.sha256), .integer(attachment.size), .text(attachment.contentType), .integer(try nextUse())])
    }

    /// A read of the bytes: the blob becomes the most recently used.
    func touch(_ sha: String) throws {
        try connection.run("UPDATE blobs SET last_used = ? WHERE sha256 = ?", [.integer(try nextUse()), .text(sha)])
    }

    /// The file is missing or does not match its hash: forgotten as held, so
    /// it is downloaded again (or, unsent, reported).
    func lostFile(_ sha: String) throws {
        folder.remove(sha)
        try connection.run("UPDATE blobs SET held = 0 WHERE sha256 = ?", [.text(sha)])
    }

    // MARK: Uploading

    /// Blobs a record change waits for: the push leaves such a change (and
    /// later ones of its record) in the queue until the blob is uploaded.
    func notUploaded() throws -> Set<String> {
        Set(try connection.query("SELECT sha256 FROM blobs WHERE upload IN ('waiting', 'uploading', 'failed')") { $0.string(0) })
    }

    /// Whether any blob is not uploaded yet (a quick check for every push).
    func anyNotUploaded() throws -> Bool {
        try connection.first("SELECT 1 FROM blobs WHERE upload IN ('waiting', 'uploading', 'failed') LIMIT 1") { _ in true } ?? false
    }

    /// The uploads to make now, smallest first (a huge file never holds the
    /// small ones back): blobs a queued change names that are not on the
    /// server yet. On the way, a failed blob that a new change names again
    /// is tried again (the person attached it anew), and the leftovers of a
    /// crash between copying a file and writing its record are removed.
    func uploadsDue() throws -> [Row] {
        let named = try namedByQueuedChanges()
        var refused: Set<String>?
        var due: [Row] = []
        let rows = try connection.query(
            "SELECT \(Self.columns) FROM blobs WHERE upload IN ('waiting', 'uploading', 'failed') ORDER BY size, attached_at"
        ) { row($0) }
        for row in rows {
            guard let row else { continue }
            let sha = row.attachment.sha256
            guard named.contains(sha) else {
                if refused == nil { refused = try namedByRefusedRecords() }
                if row.upload != "failed", !attachedHere.contains(sha), refused?.contains(sha) == false {
                    // Attached by a process that ended before writing the record
                    // that was to name it, or named by a change since undone.
                    try connection.run("DELETE FROM blobs WHERE sha256 = ?", [.text(sha)])
                    folder.remove(sha)
                }
                continue
            }
            if row.upload == "failed" {
                // The changes it held back were refused; this one is new.
                try connection.run(
                    "UPDATE blobs SET upload = 'waiting', failures = 0, last_error = NULL WHERE sha256 = ?", [.text(sha)])
                var retried = row
                retried.upload = "waiting"
                retried.failures = 0
                due.append(retried)
            } else {
                due.append(row)
            }
        }
        removeLeftoverFiles()
        return due.filter(\.held)
    }

    /// Files with no row (a copy whose transaction rolled back) and
    /// temporary files of an interrupted copy.
    private func removeLeftoverFiles() {
        let listing = folder.listing()
        for name in listing.leftovers { folder.removeLeftover(name) }
        guard !listing.blobs.isEmpty, let known = try? Set(connection.query("SELECT sha256 FROM blobs") { $0.string(0) }) else {
            return
        }
        for name in listing.blobs where !known.contains(name) && !attachedHere.contains(name) { folder.remove(name) }
    }

    func noteAttempt(_ sha: String) throws {
        try connection.run("UPDATE blobs SET attempts = attempts + 1 WHERE sha256 = ?", [.text(sha)])
    }

    /// The server holds the first `bytes`.
    func noteProgress(_ sha: String, bytes: Int64) throws {
        try connection.run(
            "UPDATE blobs SET upload = 'uploading', uploaded_bytes = ? WHERE sha256 = ? AND upload IN ('waiting', 'uploading')",
            [.integer(bytes), .text(sha)])
    }

    func markUploaded(_ sha: String) throws {
        try connection.run(
            "UPDATE blobs SET upload = 'uploaded', uploaded_bytes = size, last_error = NULL WHERE sha256 = ?", [.text(sha)])
    }

    /// A refusal that may pass if tried again (a hash the server computed
    /// otherwise): counted, and `failed` once the budget is spent. Returns
    /// whether it failed for good.
    func countFailure(_ sha: String, reason: String, budget: Int) throws -> Bool {
        try connection.run(
            """
            UPDATE blobs SET failures = failures + 1, last_error = ?,
                upload = CASE WHEN failures + 1 >= ? THEN 'failed' ELSE upload END
            WHERE sha256 = ?
            """, [.text(reason), .integer(Int64(budget)), .text(sha)])
        return try row(sha)?.upload == "failed"
    }

    /// Refused for good (too large, not allowed, damaged on the device).
    func markFailed(_ sha: String, reason: String) throws {
        try connection.run(
            "UPDATE blobs SET upload = 'failed', failures = failures + 1, last_error = ? WHERE sha256 = ?",
            [.text(reason), .text(sha)])
    }

    /// The server answered `missing_attachment` for a change naming this
    /// blob (it lost it, or dropped it as unreferenced): uploaded again
    /// from the start if the bytes are here and the budget allows. Returns
    /// whether an upload is queued.
    func requeue(_ sha: String, budget: Int) throws -> Bool {
        guard let row = try row(sha), row.held, row.failures < budget, folder.holds(sha) else { return false }
        try connection.run(
            """
            UPDATE blobs SET upload = 'waiting', uploaded_bytes = 0, failures = failures + 1,
                last_error = 'the server did not hold it' WHERE sha256 = ?
            """, [.text(sha)])
        return true
    }

    // MARK: What names a blob

    /// Blobs named by changes in the outbox (never-sent ones included).
    func namedByQueuedChanges() throws -> Set<String> {
        var named: Set<String> = []
        try connection.forEach("SELECT data FROM outbox WHERE data IS NOT NULL") { [payloads = tables.payloads] row in
            guard let text = try? payloads.text(row, 0), Self.mayName(text),
                let object = try? JSONObject.parseObject(text)
            else { return }
            for attachment in AttachedFile.all(in: object).values { named.insert(attachment.sha256) }
        }
        return named
    }

    /// Blobs named by records the server refused and by edits that lost a
    /// conflict: the person may fix and resend them, or apply the lost edit
    /// again, so their bytes stay.
    func namedByRefusedRecords() throws -> Set<String> {
        var named: Set<String> = []
        for collection in collections {
            for record in try tables.query(RecordQuery(collection, filter: .syncState(.rejected))) {
                for attachment in AttachedFile.all(in: record.value).values { named.insert(attachment.sha256) }
            }
        }
        try connection.forEach("SELECT local_change FROM conflicts WHERE local_change IS NOT NULL") { [payloads = tables.payloads] row in
            guard let text = try? payloads.text(row, 0), Self.mayName(text), let object = try? JSONObject.parseObject(text) else { return }
            for attachment in AttachedFile.all(in: object).values { named.insert(attachment.sha256) }
        }
        return named
    }

    /// What breaks the promise that no photo still needed was evicted: a
    /// blob still to upload (or refused, so the person can retry) without
    /// its file, one a queued change or a refused record names without its
    /// file, and a file whose bytes no longer hash to its name.
    func problems() throws -> [String] {
        var problems: [String] = []
        let rows = try connection.query("SELECT \(Self.columns) FROM blobs") { row($0) }.compactMap { $0 }
        let byName = Dictionary(rows.map { ($0.attachment.sha256, $0) }, uniquingKeysWith: { first, _ in first })
        for row in rows where row.upload != nil && row.upload != "uploaded" {
            if !row.held || !folder.holds(row.attachment.sha256) {
                problems.append("the \(row.upload ?? "") blob \(row.attachment.sha256.prefix(12)) has no file")
            }
        }
        for sha in try namedByQueuedChanges().union(namedByRefusedRecords()) {
            guard let row = byName[sha] else { continue }
            if !row.held || !folder.holds(sha) { problems.append("the blob \(sha.prefix(12)) a change still needs was evicted") }
        }
        for row in rows where row.held && !folder.verify(row.attachment.sha256, size: row.attachment.size) {
            problems.append("the file of blob \(row.attachment.sha256.prefix(12)) does not hold its bytes")
        }
        return problems
    }

    /// Text that cannot hold an attachment is not parsed.
    private static func mayName(_ text: String) -> Bool { text.utf8.count > 64 && text.contains("sha256") }

    // MARK: Eviction

    /// Bytes of attachment files on the device.
    func heldBytes() throws -> Int64 {
        try connection.first("SELECT coalesce(sum(size), 0) FROM blobs WHERE held = 1") { $0.int64(0) } ?? 0
    }

    /// Removes files, least recently used first, until at most `budget`
    /// bytes are held. Never one the server does not hold yet, one a queued
    /// change names (a `missing_attachment` answer would need it) or one a
    /// refused record names. Returns the blobs evicted.
    func evict(toFit budget: Int64) throws -> [String] {
        var held = try heldBytes()
        guard held > budget else { return [] }
        let kept = try namedByQueuedChanges().union(namedByRefusedRecords())
        var evicted: [String] = []
        let synced = try connection.query(
            "SELECT sha256, size FROM blobs WHERE held = 1 AND (upload IS NULL OR upload = 'uploaded') ORDER BY last_used"
        ) { ($0.string(0), $0.int64(1)) }
        for (sha, size) in synced {
            guard held > budget else { break }
            guard !kept.contains(sha) else { continue }
            try connection.run("UPDATE blobs SET held = 0 WHERE sha256 = ?", [.text(sha)])
            folder.remove(sha)
            held -= size
            evicted.append(sha)
        }
        return evicted
    }

    // MARK: Status

    func summary() throws -> AttachmentSummary {
        var summary = AttachmentSummary()
        try connection.forEach(
            "SELECT upload, count(*), coalesce(sum(size), 0), coalesce(sum(uploaded_bytes), 0) FROM blobs WHERE upload IS NOT NULL GROUP BY upload"
        ) { row in
            let count = Int(row.int64(1))
            switch row.string(0) {
            case "waiting", "uploading":
                summary.waiting += count
                summary.bytesWaiting += row.int64(2) - row.int64(3)
                summary.bytesToUpload += row.int64(2)
                summary.bytesUploaded += row.int64(3)
            case "failed":
                summary.failed += count
            default:
                break
            }
        }
        summary.bytesOnDevice = try heldBytes()
        return summary
    }

    func state(of attachment: AttachedFile) throws -> AttachmentState {
        guard let row = try row(attachment.sha256) else { return .notDownloaded }
        switch row.upload {
        case "waiting": return .waiting
        case "uploading": return .uploading(bytesSent: row.uploadedBytes, totalBytes: row.attachment.size)
        case "failed": return .failed(reason: row.lastError ?? "refused")
        default: return row.held && folder.holds(attachment.sha256) ? .onDevice : .notDownloaded
        }
    }
}
