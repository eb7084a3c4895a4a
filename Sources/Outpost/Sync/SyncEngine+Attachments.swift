import Foundation
public import OutpostCore

extension SyncEngine {
    /// The push of a cycle with its attachments: what can go is pushed
    /// first (a change naming no pending attachment never waits for one);
    /// then attachments are uploaded, smallest first, within the cycle's
    /// upload time; then the changes they released are pushed. A change the
    /// server answered `missing_attachment` goes round once more.
    func sendPhase(_ generation: UInt64, _ report: inout SyncReport) async throws {
        try await pushPhase(generation, &report)
        var uploaded = false
        for _ in 0..<3 {
            guard try await store.hasAttachmentsToUpload() else { break }
            let reuploadsBefore = report.reuploads
            guard try await uploadPhase(generation, &report) else { break }
            uploaded = true
            try await pushPhase(generation, &report)
            guard report.reuploads > reuploadsBefore else { break }
        }
        // Files whose records the server now holds may go, above the budget.
        if uploaded { _ = try? await store.evictAttachments() }
    }

    /// A blob request whose status the caller reads; a request that got no
    /// answer throws its `SyncFailure`, and the outcome feeds connectivity.
    func blobExchange(_ call: @Sendable (ServerClient) async throws -> TransportResponse) async throws -> TransportResponse {
        let started = clock.now()
        do {
            let answer = try await call(client)
            if (500...599).contains(answer.status) || answer.status == 429 {
                await record(.serverStruggling)
            } else {
                await record(.answered(latency: clock.now() - started))
            }
            return answer
        } catch let failure as ServerClient.Failure {
            await record(failure)
            throw failure.failure
        }
    }

    // MARK: Downloads

    /// An attachment's bytes, from the device when it holds them, else
    /// downloaded (with progress) and kept within the storage budget.
    public nonisolated func attachmentData(_ attachment: AttachedFile) -> AttachmentDownload {
        store.attachmentData(attachment)
    }

    /// Downloads a blob in ranges, so progress is reported as it comes and
    /// a cut resumes where it stopped; the whole is checked against its hash.
    func downloadBlob(_ attachment: AttachedFile, progress: @Sendable (AttachmentProgress) -> Void) async throws -> Data {
        guard !status.signInRequired else { throw SyncFailure.signInRequired }
        var data = Data()
        data.reserveCapacity(Int(attachment.size))
        progress(AttachmentProgress(bytesDone: 0, totalBytes: attachment.size))
        var cuts = 0
        while Int64(data.count) < attachment.size {
            try Task.checkCancellation()
            let first = Int64(data.count)
            let last = min(attachment.size, first + Int64(Self.downloadPieceBytes)) - 1
            let timeout = options.requestTimeout + Double(last - first + 1) / AttachmentUploads.slowestBytesPerSecond
            let answer: TransportResponse
            do {
                answer = try await blobExchange { try await $0.blobGet(attachment.sha256, first: first, last: last, timeout: timeout) }
            } catch SyncFailure.noAnswer where cuts < 3 {
                cuts += 1
                continue
            }
            switch answer.status {
            case 206:
                data.append(answer.body)
            case 200:
                // The whole blob (a server or proxy that ignored the range).
                data = answer.body
            case 404:
                throw SyncFailure.refused(ErrorBody(code: .notFound, message: "The server holds no such attachment for this person."))
            default:
                throw ServerClient.failure(for: answer)
            }
            guard Int64(data.count) <= attachment.size, !answer.body.isEmpty else {
                throw SyncFailure.invalidAnswer("the server sent \(data.count) bytes of a \(attachment.size)-byte attachment")
            }
            progress(AttachmentProgress(bytesDone: Int64(data.count), totalBytes: attachment.size))
        }
        guard SHA256.hex(of: data) == attachment.sha256 else {
            throw SyncFailure.invalidAnswer("the downloaded bytes do not match the attachment's hash")
        }
        return data
    }

    static let downloadPieceBytes = 1 << 20

    /// What the server says of a blob known only by its hash (`HEAD`): its
    /// size and type, for a download. Not found (or not this person's) throws.
    package func describeBlob(_ sha: String) async throws -> AttachedFile {
        let head = try await blobExchange { try await $0.blobHead(sha) }
        guard head.status == 200 else {
            if head.status == 404 {
                throw SyncFailure.refused(ErrorBody(code: .notFound, message: "The server holds no such attachment for this person."))
            }
            throw ServerClient.failure(for: head)
        }
        guard let size = head.headers["content-length"].flatMap({ Int64($0.trimmingCharacters(in: .whitespaces)) }),
            let attachment = AttachedFile(sha256: sha, size: size, contentType: head.headers["content-type"] ?? "application/octet-stream")
        else { throw SyncFailure.invalidAnswer("the server's HEAD gave no usable Content-Length") }
        return attachment
    }

    /// Lets the store download attachments it does not hold through this engine.
    nonisolated func connectBlobSource() {
        store.blobSource.withLock { source in
            source = BlobSource { [weak self] attachment, progress in
                guard let self else { throw StoreError.attachmentNotOnDevice(attachment.sha256) }
                return try await self.downloadBlob(attachment, progress: progress)
            }
        }
    }
}
