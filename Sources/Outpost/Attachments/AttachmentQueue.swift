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

    /// The table, where every statement on it lives.
    var table: BlobTable { BlobTable(connection: connection) }

    func row(_ sha: String) throws -> Row? { try table.row(sha) }

    private func nextUse() throws -> Int64 {
        let current = try useClock ?? table.lastUse()
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
        try table.attach(attachment, use: try nextUse(), now: now)
        attachedHere.insert(attachment.sha256)
    }

    /// Bytes downloaded for a record: held here, not this device's to upload.
    func cached(_ attachment: AttachedFile) throws {
        try table.cache(attachment, use: try nextUse())
    }

    /// A read of the bytes: the blob becomes the most recently used.
    func touch(_ sha: String) throws {
        try table.setLastUse(sha, try nextUse())
    }

    /// The file is missing or does not match its hash: forgotten as held, so
    /// it is downloaded again (or, unsent, reported).
    func lostFile(_ sha: String) throws {
        folder.remove(sha)
        try table.markNotHeld(sha)
    }

    // MARK: Uploading

    /// Blobs a record change waits for: the push leaves such a change (and
    /// later ones of its record) in the queue until the blob is uploaded.
    func notUploaded() throws -> Set<String> {
        try table.notUploaded()
    }

    /// Whether any blob is not uploaded yet (a quick check for every push).
    func anyNotUploaded() throws -> Bool {
        try table.anyNotUploaded()
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
        for row in try table.unfinished() {
            guard let row else { continue }
            let sha = row.attachment.sha256
            guard named.contains(sha) else {
                if refused == nil { refused = try namedByRefusedRecords() }
                if row.upload != "failed", !attachedHere.contains(sha), refused?.contains(sha) == false {
                    // Attached by a process that ended before writing the record
                    // that was to name it, or named by a change since undone.
                    try table.remove(sha)
                    folder.remove(sha)
                }
                continue
            }
            if row.upload == "failed" {
                // The changes it held back were refused; this one is new.
                try table.retryFailed(sha)
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
        guard !listing.blobs.isEmpty, let known = try? table.names() else {
            return
        }
        for name in listing.blobs where !known.contains(name) && !attachedHere.contains(name) { folder.remove(name) }
    }

    func noteAttempt(_ sha: String) throws {
        try table.noteAttempt(sha)
    }

    /// The server holds the first `bytes`.
    func noteProgress(_ sha: String, bytes: Int64) throws {
        try table.noteProgress(sha, bytes: bytes)
    }

    func markUploaded(_ sha: String) throws {
        try table.markUploaded(sha)
    }

    /// A refusal that may pass if tried again (a hash the server computed
    /// otherwise): counted, and `failed` once the budget is spent. Returns
    /// whether it failed for good.
    func countFailure(_ sha: String, reason: String, budget: Int) throws -> Bool {
        try table.countFailure(sha, reason: reason, budget: budget)
        return try row(sha)?.upload == "failed"
    }

    /// Refused for good (too large, not allowed, damaged on the device).
    func markFailed(_ sha: String, reason: String) throws {
        try table.markFailed(sha, reason: reason)
    }

    /// The server answered `missing_attachment` for a change naming this
    /// blob (it lost it, or dropped it as unreferenced): uploaded again
    /// from the start if the bytes are here and the budget allows. Returns
    /// whether an upload is queued.
    func requeue(_ sha: String, budget: Int) throws -> Bool {
        guard let row = try row(sha), row.held, row.failures < budget, folder.holds(sha) else { return false }
        try table.requeue(sha)
        return true
    }

    // MARK: What names a blob

    /// Blobs named by changes in the outbox (never-sent ones included).
    func namedByQueuedChanges() throws -> Set<String> {
        var named: Set<String> = []
        try OutboxTable(connection: connection).forEachPayload { [payloads = tables.payloads] row in
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
        try ConflictLog(connection: connection, payloads: tables.payloads).forEachLocalChange { [payloads = tables.payloads] row in
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
        let rows = try table.all()
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
        try table.heldBytes()
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
        for (sha, size) in try table.evictable() {
            guard held > budget else { break }
            guard !kept.contains(sha) else { continue }
            try table.markNotHeld(sha)
            folder.remove(sha)
            held -= size
            evicted.append(sha)
        }
        return evicted
    }

    // MARK: Status

    func summary() throws -> AttachmentSummary {
        var summary = AttachmentSummary()
        try table.forEachUploadState { state, count, bytes, uploaded in
            switch state {
            case "waiting", "uploading":
                summary.waiting += count
                summary.bytesWaiting += bytes - uploaded
                summary.bytesToUpload += bytes
                summary.bytesUploaded += uploaded
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
