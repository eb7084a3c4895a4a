public import Foundation
public import OutpostCore

/// What downloads attachments the device does not hold: the sync engine
/// connected to the store sets it.
package struct BlobSource: Sendable {
    package var fetch: @Sendable (AttachedFile, @escaping @Sendable (AttachmentProgress) -> Void) async throws -> Data

    package init(fetch: @escaping @Sendable (AttachedFile, @escaping @Sendable (AttachmentProgress) -> Void) async throws -> Data) {
        self.fetch = fetch
    }
}

extension LocalStore {
    /// 512 MiB of attachment files, unless the app says otherwise.
    public static let defaultAttachmentBudget: Int64 = 512 << 20
    static let attachmentBudgetKey = "attachments.budget"

    /// Copies bytes into the store as an attachment; put the value in a
    /// record's `attachment` field. The bytes are uploaded before the
    /// record's change is sent.
    ///
    /// ```swift
    /// let photo = try await store.attach(jpegData, contentType: "image/jpeg")
    /// try await store.create(Visit(person: link, visitedAt: .now, photo: photo))
    /// ```
    ///
    /// To write the record in the same transaction, call
    /// ``StoreTransaction/attach(_:contentType:)`` inside ``write(_:)``.
    public func attach(_ data: Data, contentType: String) throws -> AttachedFile {
        try write { try $0.attach(data, contentType: contentType) }
    }

    /// Copies a file into the store as an attachment (read piece by piece,
    /// never whole in memory); the content type is guessed from the extension when not given.
    public func attach(contentsOf file: URL, contentType: String? = nil) throws -> AttachedFile {
        try write { try $0.attach(contentsOf: file, contentType: contentType) }
    }

    /// Where an attachment stands: waiting, uploading, failed, on this device or only on the server.
    public func attachmentState(_ attachment: AttachedFile) throws -> AttachmentState {
        try checkOpen()
        return try attachments.state(of: attachment)
    }

    /// Files and bytes waiting to upload, the upload's progress, refusals and bytes kept.
    public func attachmentSummary() throws -> AttachmentSummary {
        try checkOpen()
        return try attachments.summary()
    }

    /// The most bytes of attachment files kept on the device (default
    /// 512 MiB). Above it, files the server holds are removed least recently
    /// used first, never one still to upload; they download again on demand.
    public var attachmentStorageBudget: Int64 { attachmentBudget }

    /// Sets the storage budget (kept across launches) and evicts what no longer fits.
    public func setAttachmentStorageBudget(_ bytes: Int64) throws {
        try checkOpen()
        guard bytes >= 0 else { throw StoreError.invalidRecord("a storage budget cannot be negative") }
        if isReadOnly { throw StoreError.readOnly }
        attachmentBudget = bytes
        try translatingStorageErrors {
            try keyValues.set(Self.attachmentBudgetKey, String(bytes))
            _ = try attachments.evict(toFit: bytes)
        }
    }

    /// An attachment's bytes: at once when they are on the device, else
    /// downloaded by the connected sync engine (with progress) and kept
    /// within the storage budget.
    ///
    /// ```swift
    /// let download = store.attachmentData(visit.photo)
    /// for try await step in download { progress = step.fraction }
    /// let bytes = try await download.data
    /// ```
    ///
    /// Without a sync engine, bytes not on the device fail with
    /// ``StoreError/attachmentNotOnDevice(_:)``.
    public nonisolated func attachmentData(_ attachment: AttachedFile) -> AttachmentDownload {
        let (steps, continuation) = AsyncThrowingStream.makeStream(of: AttachmentProgress.self, bufferingPolicy: .bufferingNewest(8))
        let source = blobSource
        let task = Task<Data, any Error> {
            do {
                if let held = try await self.heldData(attachment) {
                    continuation.yield(AttachmentProgress(bytesDone: attachment.size, totalBytes: attachment.size))
                    continuation.finish()
                    return held
                }
                guard let fetcher = source.current else { throw StoreError.attachmentNotOnDevice(attachment.sha256) }
                let data = try await fetcher.fetch(attachment) { continuation.yield($0) }
                try await self.keepDownloaded(attachment, data)
                continuation.finish()
                return data
            } catch {
                continuation.finish(throwing: error)
                throw error
            }
        }
        continuation.onTermination = { termination in
            if case .cancelled = termination { task.cancel() }
        }
        return AttachmentDownload(attachment: attachment, steps: steps, task: task)
    }

    /// The bytes when the device holds them intact; a file that no longer
    /// matches its hash is dropped (and downloaded again).
    func heldData(_ attachment: AttachedFile) throws -> Data? {
        try checkOpen()
        let sha = attachment.sha256
        guard let row = try attachments.row(sha), row.held, attachments.folder.holds(sha) else { return nil }
        let data: Data
        do {
            data = try attachments.folder.read(sha, size: row.attachment.size, from: 0, count: Int(row.attachment.size))
        } catch StoreError.damagedAttachment, StoreError.attachmentNotOnDevice {
            if row.upload == nil || row.upload == "uploaded", !isReadOnly { try attachments.lostFile(sha) }
            return nil
        }
        guard SHA256.hex(of: data) == sha else {
            if row.upload == nil || row.upload == "uploaded", !isReadOnly { try attachments.lostFile(sha) }
            throw StoreError.damagedAttachment(sha)
        }
        if !isReadOnly { try? attachments.touch(sha) }
        return data
    }

    /// Keeps downloaded bytes (already checked against their hash), then evicts what no longer fits.
    func keepDownloaded(_ attachment: AttachedFile, _ data: Data) throws {
        try checkOpen()
        guard !isReadOnly else { return }
        try translatingStorageErrors {
            let stored = try attachments.folder.store(data)
            guard stored.sha == attachment.sha256 else { throw StoreError.damagedAttachment(attachment.sha256) }
            try attachments.cached(attachment)
            _ = try attachments.evict(toFit: attachmentBudget)
        }
    }

    // MARK: For the sync engine

    /// The uploads to make now, smallest first.
    package func attachmentUploadsDue() throws -> [AttachmentUpload] {
        try checkOpen()
        guard !isReadOnly else { return [] }
        return try translatingStorageErrors {
            try attachments.uploadsDue().map {
                AttachmentUpload(attachment: $0.attachment, knownOffset: $0.uploadedBytes, attempts: $0.attempts)
            }
        }
    }

    /// Whether any attachment waits for the server (a quick check before each cycle's uploads).
    package func hasAttachmentsToUpload() throws -> Bool {
        try checkOpen()
        return try attachments.anyNotUploaded()
    }

    /// Bytes of an attachment being uploaded.
    package func attachmentBytes(_ attachment: AttachedFile, from offset: Int64, count: Int) throws -> Data {
        try checkOpen()
        return try attachments.folder.read(attachment.sha256, size: attachment.size, from: offset, count: count)
    }

    /// Whether the file still matches its hash (asked after the server said it does not).
    package func attachmentFileIsIntact(_ attachment: AttachedFile) -> Bool {
        attachments.folder.verify(attachment.sha256, size: attachment.size)
    }

    /// An upload stopped before the server held the whole: the next one asks
    /// the server where it stands before sending.
    package func noteUploadInterrupted(_ attachment: AttachedFile) throws {
        try translatingStorageErrors { try attachments.noteAttempt(attachment.sha256) }
    }

    package func noteUploadProgress(_ attachment: AttachedFile, bytes: Int64) throws {
        try translatingStorageErrors { try attachments.noteProgress(attachment.sha256, bytes: bytes) }
    }

    /// The server holds the whole blob: changes naming it may go.
    package func markUploaded(_ attachment: AttachedFile) throws {
        try translatingStorageErrors { try attachments.markUploaded(attachment.sha256) }
    }

    /// Several blobs the server holds whole, in one commit (one sync for a
    /// run of photos uploaded in quick succession).
    package func markUploaded(_ uploaded: [AttachedFile]) throws {
        guard !uploaded.isEmpty else { return }
        try checkOpen()
        try translatingStorageErrors {
            try connection.transaction { for attachment in uploaded { try attachments.markUploaded(attachment.sha256) } }
        }
    }

    /// A refusal that may pass if tried again; true once the budget is spent
    /// and the upload failed for good.
    package func countUploadFailure(_ attachment: AttachedFile, reason: String, budget: Int) throws -> Bool {
        try translatingStorageErrors { try attachments.countFailure(attachment.sha256, reason: reason, budget: budget) }
    }

    /// Refused for good: the upload is `failed`, and every never-sent change
    /// naming it is refused visibly (its record shows why and stays
    /// editable), so nothing waits for it in silence.
    package func failUpload(_ attachment: AttachedFile, reason: String) throws -> [RejectedChange] {
        try checkOpen()
        try translatingStorageErrors { try attachments.markFailed(attachment.sha256, reason: reason) }
        let waiting = try outbox.rows(where: OutboxTable.unsentWithData).filter { row in
            try AttachedFile.all(in: row.data()).values.contains { $0.sha256 == attachment.sha256 }
        }
        guard !waiting.isEmpty else { return [] }
        return try rejectLocally(
            waiting.map { $0.entryValue() }, code: "attachment_not_uploaded",
            message: "The attachment (\(attachment.contentType), \(attachment.size) bytes) could not be uploaded: \(reason)")
    }

    /// Attachments whose bytes are gone though something still needs them
    /// (the simulation's checker asks after every sync).
    package func attachmentProblems() throws -> [String] {
        try checkOpen()
        return try attachments.problems()
    }

    /// Evicts synced attachment files above the storage budget.
    package func evictAttachments() throws -> [String] {
        try checkOpen()
        guard !isReadOnly else { return [] }
        return try translatingStorageErrors { try attachments.evict(toFit: attachmentBudget) }
    }
}

/// One attachment to upload, as the store hands it to the sync engine.
package struct AttachmentUpload: Sendable, Equatable {
    package var attachment: AttachedFile
    /// What the server was last known to hold (0 when unknown).
    package var knownOffset: Int64
    /// Earlier tries: after one, the server is asked where it stands first.
    package var attempts: Int
}

extension AttachedFile {
    /// A media type for a file extension, `application/octet-stream` when unknown.
    public static func contentType(forExtension pathExtension: String) -> String {
        switch pathExtension.lowercased() {
        case "jpg", "jpeg": return "image/jpeg"
        case "png": return "image/png"
        case "heic": return "image/heic"
        case "heif": return "image/heif"
        case "gif": return "image/gif"
        case "webp": return "image/webp"
        case "pdf": return "application/pdf"
        case "mp4", "m4v": return "video/mp4"
        case "mov": return "video/quicktime"
        case "m4a": return "audio/mp4"
        case "txt": return "text/plain"
        case "json": return "application/json"
        case "csv": return "text/csv"
        default: return "application/octet-stream"
        }
    }
}

extension LocalStore {
    /// The protection class the attachment files are written with: the store's own.
    package var attachmentFileProtection: FileProtection { attachments.folder.protection }
}
