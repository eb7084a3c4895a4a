import Foundation
import OutpostCore

/// Attachment uploads' state, as a value: how large a piece goes in one
/// request (adapted to the link) and how many bytes went. The uploads
/// themselves (I/O) are the engine's, below.
package struct AttachmentUploads {
    /// Bytes per upload request, adapted to the link.
    package private(set) var pieceBytes = 4 << 20
    /// Bytes sent since the engine started (resent ones included).
    package private(set) var bytesSent: Int64 = 0

    /// Below this speed a piece's upload is taken for dead: its timeout
    /// grows with its size from the request timeout up.
    package static let slowestBytesPerSecond = 32.0 * 1024
    package static let smallestPiece = 256 << 10
    package static let largestPiece = 8 << 20

    package init() {}

    /// A piece of `count` bytes was answered after `took`. Pieces grow on a
    /// fast link (fewer requests) and shrink on a slow one (a cut loses
    /// less, a piece ends well within its timeout).
    package mutating func pieceAnswered(bytes count: Int, took: Duration, requestTimeout: Double) {
        bytesSent += Int64(count)
        guard count >= pieceBytes else { return }
        let seconds = Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18
        if seconds < requestTimeout / 20 {
            pieceBytes = min(Self.largestPiece, pieceBytes * 2)
        } else if seconds > requestTimeout / 4 {
            pieceBytes = max(Self.smallestPiece, pieceBytes / 2)
        }
    }

    /// A piece of `count` bytes got no usable answer. A cut mid-body keeps
    /// what arrived; smaller pieces lose less next time.
    package mutating func pieceFailed(bytes count: Int, _ failure: SyncFailure) {
        bytesSent += Int64(count)
        if failure == .noAnswer { pieceBytes = max(Self.smallestPiece, pieceBytes / 2) }
    }
}

/// An upload the server refused for good (too large, not allowed, damaged here).
struct UploadRefusal: Error {
    var reason: String
}

extension SyncEngine {
    /// How long completed uploads may wait to be marked in the store: on a
    /// fast link a commit (a sync of the store) per photo left the server
    /// idle longer than a photo took to send; on a slow one every photo is
    /// marked as it completes.
    static let uploadMarkInterval: Duration = .milliseconds(250)

    /// Uploads what is due, a few at once (``SyncOptions/attachmentUploadsAtOnce``);
    /// true when at least one upload completed. Completed uploads are marked
    /// in the store together, at least every ``uploadMarkInterval`` and
    /// before the phase ends; a crash before that sends them again, and the
    /// server, holding them whole, stores nothing of it.
    func uploadPhase(_ generation: UInt64, _ report: inout SyncReport) async throws -> Bool {
        var pending = try await store.attachmentUploadsDue()[...]
        guard !pending.isEmpty else { return false }
        let deadline = clock.now() + options.attachmentUploadTime
        let sentBefore = attachmentUploads.bytesSent
        var completed = false
        var failure: (any Error)?
        var rejected: [RejectedChange] = []
        var unmarked: [AttachedFile] = []
        var lastMarked = clock.now()
        defer { statusPublisher.send(.uploadingAttachments(false)) }
        statusPublisher.send(.uploadingAttachments(true))
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
                    unmarked.append(upload.attachment)
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
                if !unmarked.isEmpty, pending.isEmpty || clock.now() - lastMarked >= Self.uploadMarkInterval {
                    do {
                        try await store.markUploaded(unmarked)
                        unmarked.removeAll()
                    } catch {
                        failure = failure ?? error
                    }
                    lastMarked = clock.now()
                }
                if unmarked.isEmpty { await publishAttachmentProgress() }
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
        if !unmarked.isEmpty {
            do {
                try await store.markUploaded(unmarked)
            } catch {
                failure = failure ?? error
            }
            await publishAttachmentProgress()
        }
        report.rejected += rejected
        report.attachmentBytesSent += attachmentUploads.bytesSent - sentBefore
        guard schedule.isCurrent(generation) else { throw StaleGeneration() }
        if let failure { throw failure }
        return completed
    }

    /// Uploads one attachment from where the server stands. True when the
    /// server holds it whole (the caller marks it in the store); false when the cycle's time ran out first or a
    /// refusal that may pass later was counted.
    ///
    /// An upload that stops short is noted afterwards, so the next one asks
    /// the server first; a whole upload writes nothing before it (a commit
    /// per photo). After a crash mid-upload, the server's `409` with
    /// `Upload-Offset` says where to go on from instead.
    private func upload(_ upload: AttachmentUpload, until deadline: Duration) async throws -> Bool {
        do {
            let whole = try await send(upload, until: deadline)
            if !whole { try? await store.noteUploadInterrupted(upload.attachment) }
            return whole
        } catch {
            try? await store.noteUploadInterrupted(upload.attachment)
            throw error
        }
    }

    private func send(_ upload: AttachmentUpload, until deadline: Duration) async throws -> Bool {
        let attachment = upload.attachment
        var offset: Int64 = 0
        if upload.attempts > 0 || upload.knownOffset > 0 {
            // An earlier try was cut: the server says how much it kept, so no
            // byte it holds is sent again.
            let head = try await blobExchange { try await $0.blobHead(attachment.sha256) }
            switch head.status {
            case 200:
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
            let count = Int(whole ? remaining : min(Int64(attachmentUploads.pieceBytes), remaining))
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
            let timeout = options.requestTimeout + Double(count) / AttachmentUploads.slowestBytesPerSecond
            let answer: TransportResponse
            do {
                answer = try await blobExchange { [offset] in
                    try await $0.blobPut(attachment, offset: offset, bytes: bytes, timeout: timeout)
                }
            } catch let failure as SyncFailure {
                attachmentUploads.pieceFailed(bytes: count, failure)
                throw failure
            }
            attachmentUploads.pieceAnswered(bytes: count, took: clock.now() - started, requestTimeout: options.requestTimeout)
            let received = answer.headers["upload-offset"].flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }
            // Only a refusal has an error body to read (decoding a 200's cost more than its head).
            let code = answer.status == 200 ? nil : (try? WireCoding.decode(ErrorBody.self, from: answer.body))?.code
            switch answer.status {
            case 200:
                let now = received ?? (offset + Int64(count))
                if now >= attachment.size { return true }
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
        statusPublisher.send(.attachments(summary))
    }
}
