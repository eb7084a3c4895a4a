import Foundation
public import OutpostCore

/// An upload the server refused for good (too large, not allowed, damaged here).
struct UploadRefusal: Error {
    var reason: String
}

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

    /// Uploads what is due, a few at once (``SyncOptions/attachmentUploadsAtOnce``);
    /// true when at least one upload completed.
    private func uploadPhase(_ generation: UInt64, _ report: inout SyncReport) async throws -> Bool {
        var pending = try await store.attachmentUploadsDue()[...]
        guard !pending.isEmpty else { return false }
        let deadline = clock.now() + options.attachmentUploadTime
        let sentBefore = attachmentBytesSent
        var completed = false
        var failure: (any Error)?
        var rejected: [RejectedChange] = []
        defer { status.isUploadingAttachments = false }
        status.isUploadingAttachments = true
        await withTaskGroup(of: (AttachmentUpload, Result<Bool, any Error>).self) { group in
            func start(_ upload: AttachmentUpload) {
                group.addTask {
                    do {
                        return (upload, .success(try await self.upload(upload, until: deadline)))
                    } catch {
                        return (upload, .failure(error))
                    }
                }
            }
            for _ in 0..<max(1, min(options.attachmentUploadsAtOnce, pending.count)) { start(pending.removeFirst()) }
            while let (upload, outcome) = await group.next() {
                switch outcome {
                case .success(true):
                    completed = true
                    report.attachmentsUploaded += 1
                case .success(false):
                    // Stopped at the cycle's upload time (or a refusal was
                    // counted): a follow-up cycle goes on from the offset.
                    schedule.requestFollowUp(.retry)
                case .failure(let refusal as UploadRefusal):
                    // Refused for good: its changes are refused visibly, the others go on.
                    do {
                        rejected += try await store.failUpload(upload.attachment, reason: refusal.reason)
                    } catch {
                        failure = failure ?? error
                    }
                case .failure(let error):
                    // "Not now" (or the store failed): no new upload starts; those running end.
                    failure = failure ?? error
                }
                await publishAttachmentProgress()
                guard failure == nil, schedule.isCurrent(generation), !pending.isEmpty else { continue }
                guard clock.now() < deadline else {
                    // The rest goes in the next cycle: the pull is not held back.
                    schedule.requestFollowUp(.retry)
                    pending.removeAll()
                    continue
                }
                start(pending.removeFirst())
            }
        }
        report.rejected += rejected
        report.attachmentBytesSent += attachmentBytesSent - sentBefore
        guard schedule.isCurrent(generation) else { throw StaleGeneration() }
        if let failure { throw failure }
        return completed
    }

    /// Uploads one attachment from where the server stands. True when the
    /// server holds it whole; false when the cycle's time ran out first or a
    /// refusal that may pass later was counted.
    private func upload(_ upload: AttachmentUpload, until deadline: Duration) async throws -> Bool {
        let attachment = upload.attachment
        var offset: Int64 = 0
        try await store.noteUploadStarted(attachment)
        if upload.attempts > 0 || upload.knownOffset > 0 {
            // An earlier try was cut: the server says how much it kept, so no
            // byte it holds is sent again.
            let head = try await blobExchange { try await $0.blobHead(attachment.sha256) }
            switch head.status {
            case 200:
                try await store.markUploaded(attachment)
                return true
            case 404:
                offset = head.headers["upload-offset"].flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) } ?? 0
            default:
                throw ServerClient.failure(for: head)
            }
        }
        // A blob someone else uploaded whole is taken only in one request.
        var whole = false
        while true {
            if offset > 0 && clock.now() >= deadline { return false }
            let remaining = attachment.size - offset
            let count = Int(whole ? remaining : min(Int64(uploadPieceBytes), remaining))
            let bytes: Data
            do {
                bytes = try await store.attachmentBytes(attachment, from: offset, count: count)
            } catch let error as StoreError {
                switch error {
                case .damagedAttachment, .attachmentNotOnDevice:
                    throw UploadRefusal(reason: "its file on this device is missing or damaged; attach it again")
                default:
                    throw error
                }
            }
            let started = clock.now()
            let timeout = options.requestTimeout + Double(count) / Self.slowestUploadBytesPerSecond
            let answer: TransportResponse
            do {
                answer = try await blobExchange { [offset] in
                    try await $0.blobPut(attachment, offset: offset, bytes: bytes, timeout: timeout)
                }
            } catch let failure as SyncFailure {
                attachmentBytesSent += Int64(count)
                // A cut mid-body keeps what arrived; smaller pieces lose less next time.
                if failure == .noAnswer { uploadPieceBytes = max(Self.smallestUploadPiece, uploadPieceBytes / 2) }
                throw failure
            }
            attachmentBytesSent += Int64(count)
            adaptPieceSize(count: count, took: clock.now() - started)
            let received = answer.headers["upload-offset"].flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }
            let code = (try? WireCoding.decode(ErrorBody.self, from: answer.body))?.code
            switch answer.status {
            case 200:
                let now = received ?? (offset + Int64(count))
                if now >= attachment.size {
                    try await store.markUploaded(attachment)
                    return true
                }
                offset = now
                try await store.noteUploadProgress(attachment, bytes: offset)
                await publishAttachmentProgress()
            case 409 where code == .uploadOffsetMismatch:
                // Another try got further (or less far): go on from the server's copy.
                offset = received ?? 0
                try await store.noteUploadProgress(attachment, bytes: offset)
            case 400 where offset == 0 && !whole && Int64(count) < attachment.size:
                whole = true
            case 422 where code == .hashMismatch:
                guard await store.attachmentFileIsIntact(attachment) else {
                    throw UploadRefusal(reason: "its file on this device is damaged; attach it again")
                }
                if try await store.countUploadFailure(
                    attachment, reason: "the server read other bytes than were sent", budget: options.retry.budget)
                {
                    throw UploadRefusal(reason: "the server read other bytes than were sent, \(options.retry.budget) times")
                }
                return false
            case 413:
                throw UploadRefusal(reason: "it is larger than the server accepts")
            case 401, 426, 429, 500...599:
                throw ServerClient.failure(for: answer)
            case 403 where code == .tokenRevoked:
                throw ServerClient.failure(for: answer)
            default:
                // Refused as sent ("no"): counted like a refused push, failed once the budget is spent.
                let failure = ServerClient.failure(for: answer)
                let reason: String
                if case .refused(let body) = failure { reason = body.message } else { reason = "refused (\(answer.status))" }
                if try await store.countUploadFailure(attachment, reason: reason, budget: options.retry.budget) {
                    throw UploadRefusal(reason: reason)
                }
                return false
            }
        }
    }

    /// Refreshes only the attachments' figures of the status: after every
    /// upload, where reading the whole status again (the outbox's summary,
    /// held children, coverage) cost more than the upload of a photo.
    func publishAttachmentProgress() async {
        guard let summary = try? await store.attachmentSummary() else { return }
        var next = status
        next.attachments = summary
        guard next != status else { return }
        status = next
        statusListeners.yield(next)
    }

    /// Below this speed a piece's upload is taken for dead: its timeout
    /// grows with its size from the request timeout up.
    static let slowestUploadBytesPerSecond = 32.0 * 1024
    static let smallestUploadPiece = 256 << 10
    static let largestUploadPiece = 8 << 20

    /// Pieces grow on a fast link (fewer requests) and shrink on a slow one
    /// (a cut loses less, a piece ends well within its timeout).
    private func adaptPieceSize(count: Int, took: Duration) {
        guard count >= uploadPieceBytes else { return }
        let seconds = Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18
        if seconds < options.requestTimeout / 20 {
            uploadPieceBytes = min(Self.largestUploadPiece, uploadPieceBytes * 2)
        } else if seconds > options.requestTimeout / 4 {
            uploadPieceBytes = max(Self.smallestUploadPiece, uploadPieceBytes / 2)
        }
    }

    /// A blob request whose status the caller reads; a request that got no
    /// answer throws its `SyncFailure`, and the outcome feeds connectivity.
    private func blobExchange(_ call: @Sendable (ServerClient) async throws -> TransportResponse) async throws -> TransportResponse {
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
            let timeout = options.requestTimeout + Double(last - first + 1) / Self.slowestUploadBytesPerSecond
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
