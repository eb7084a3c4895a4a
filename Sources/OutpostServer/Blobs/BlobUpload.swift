import COpenSSL
import Foundation
import OutpostCore

/// One `PUT /v1/blobs/{sha256}` while its body arrives: checked from its
/// headers before any byte is read, then stored piece by piece (never the
/// whole body in memory), then answered.
///
/// - Without `Content-Range` the body is the whole blob (`Content-Length`
///   bytes); with `Content-Range: bytes <start>-<end>/<total>` it is that
///   part, and `start` must be where the server's copy ends (`HEAD` says
///   where), else `409 upload_offset_mismatch` with `Upload-Offset`.
/// - When the last byte is stored the whole is hashed: a mismatch drops the
///   upload (`422 hash_mismatch`).
/// - A blob already complete: the uploader's PUT is a no-op 200; anyone
///   else's bytes are hashed as they come, not stored, and a match makes
///   them an owner too (who may read it by its hash).
/// - A body longer or shorter than declared keeps nothing of it (400).
/// - A connection cut mid-body keeps every piece stored before the cut: the
///   next PUT resumes from there.
final class BlobUpload: @unchecked Sendable {
    // @unchecked Sendable: used by one request at a time (libmicrohttpd calls
    // a connection's handler from one thread at a time).
    enum Start {
        case accept(BlobUpload)
        /// The answer, and its code for the metrics.
        case refuse(HTTPResponse, code: ErrorCode)
    }

    private enum Mode {
        /// Store the bytes from `offset`.
        case store
        /// The blob is complete; hash the bytes to make the sender an owner.
        case verify(OpaquePointer)
        /// The blob is complete and the sender owns it: read and discard.
        case discard
    }

    private let store: BlobStore
    private let sha: String
    private let user: String
    private let size: Int64
    private let start: Int64
    private let declared: Int64
    private let clock: any WallClock
    private var mode: Mode
    /// Where `received` stands: this upload's bytes before it are durable.
    private var offset: Int64
    /// Where the bytes written to the blob's file end (beside a SQLite
    /// database they are synced later, many pieces at once).
    private var written: Int64
    private var buffer: [UInt8] = []
    private var seen: Int64 = 0
    private var failure: APIError?
    private var finished = false

    private init(
        store: BlobStore, sha: String, user: String, size: Int64, start: Int64, declared: Int64, clock: any WallClock, mode: Mode
    ) {
        self.store = store
        self.sha = sha
        self.user = user
        self.size = size
        self.start = start
        self.declared = declared
        self.clock = clock
        self.mode = mode
        self.offset = start
        self.written = start
    }

    deinit {
        if case .verify(let context) = mode { EVP_MD_CTX_free(context) }
    }

    /// The blob's name from a path segment (hex in any letter case), or nil.
    static func name(_ segment: String) -> String? {
        let name = segment.lowercased()
        return BlobStore.isName(name) ? name : nil
    }

    /// Checks an authenticated request's headers (the body has not been
    /// read yet); throws the refusal's error.
    static func begin(_ route: RouteRequest, server: SyncServer) throws -> Start {
        let request = route.http
        let principal = try route.caller()
        let user = principal.user
        guard let sha = name(route.parameter("sha256")) else {
            throw APIError(
                .invalidRequest, "A blob is named by the SHA-256 of its bytes: 64 hexadecimal digits.",
                fields: ["sha256": "must be 64 hexadecimal digits"])
        }
        let length = request.headers["content-length"].flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }
        let range = try request.headers["content-range"].map(ContentRange.init)
        let size: Int64
        let first: Int64
        let declared: Int64
        if let range {
            (size, first, declared) = (range.total, range.first, range.last - range.first + 1)
            if let length, length != declared {
                throw APIError(
                    .invalidRequest, "Content-Length (\(length)) is not the length Content-Range gives (\(declared)).",
                    fields: ["content-range": "does not match Content-Length"])
            }
        } else {
            guard let length else {
                throw APIError(
                    .invalidRequest, "Send Content-Length, or Content-Range for a part of the blob.",
                    fields: ["content-length": "is required"])
            }
            (size, first, declared) = (length, 0, length)
        }
        let limit = Int64(server.config.maxBlobBytes)
        guard size <= limit else {
            throw APIError(.payloadTooLarge, "A blob may be at most \(limit / 1_048_576) MiB.")
        }
        let store = server.blobs
        let now = ServerTimestamp(server.clock.now()).rawValue
        let state = try store.begin(sha, size: size, contentType: request.headers["content-type"], uploader: principal.user, now: now)
        guard state.size == size else {
            throw APIError(
                .invalidRequest, "This blob is \(state.size) bytes long, not \(size).",
                fields: ["content-range": "gives another total than the blob's size"])
        }
        if state.complete {
            if try store.isOwner(sha, principal.user) {
                return .accept(BlobUpload(
                    store: store, sha: sha, user: principal.user, size: size, start: first, declared: declared,
                    clock: server.clock, mode: .discard))
            }
            guard first == 0, declared == size, let context = EVP_MD_CTX_new(),
                EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1
            else {
                throw APIError(
                    .invalidRequest, "This blob is held already: send all of its bytes in one request.",
                    fields: ["content-range": "must cover the whole blob"])
            }
            return .accept(BlobUpload(
                store: store, sha: sha, user: principal.user, size: size, start: 0, declared: size, clock: server.clock,
                mode: .verify(context)))
        }
        guard first == state.received else {
            var refusal = SyncServer.errorResponse(
                APIError(
                    .uploadOffsetMismatch,
                    "The server holds the first \(state.received) bytes of this blob: send from there."),
                user: user)
            refusal.headers["Upload-Offset"] = String(state.received)
            return .refuse(refusal, code: .uploadOffsetMismatch)
        }
        return .accept(BlobUpload(
            store: store, sha: sha, user: principal.user, size: size, start: first, declared: declared, clock: server.clock,
            mode: .store))
    }

    /// The next bytes of the body.
    func write(_ bytes: UnsafeRawBufferPointer) {
        guard failure == nil, !bytes.isEmpty else { return }
        seen += Int64(bytes.count)
        guard seen <= declared else {
            failure = APIError(
                .invalidRequest, "The body is longer than the \(declared) bytes declared.",
                fields: ["content-range": "is shorter than the body"])
            return
        }
        switch mode {
        case .discard:
            return
        case .verify(let context):
            _ = EVP_DigestUpdate(context, bytes.baseAddress, bytes.count)
        case .store:
            buffer.append(contentsOf: bytes.bindMemory(to: UInt8.self))
            if buffer.count >= BlobStore.pieceBytes { writeOut() }
        }
    }

    /// Hands what is buffered to the store: beside a SQLite database written
    /// to the file and made durable once ``BlobStore/syncBytes`` wait for it
    /// (a sync per piece cost more than receiving the piece); on PostgreSQL
    /// stored and counted at once.
    private func writeOut() {
        guard case .store = mode, !buffer.isEmpty, failure == nil else { return }
        do {
            if store.folder != nil {
                try store.write(sha, at: written, buffer)
                written += Int64(buffer.count)
                buffer.removeAll(keepingCapacity: true)
                if written - offset >= Int64(BlobStore.syncBytes) { commit() }
                return
            }
            // Whoever stored bytes of it may ask where it stands (and read it once complete).
            guard try store.append(sha, at: offset, buffer, owner: user, now: ServerTimestamp(clock.now()).rawValue) else {
                failure = APIError(.uploadOffsetMismatch, "Another upload of this blob went ahead; ask where it stands.")
                return
            }
            offset += Int64(buffer.count)
            written = offset
            metrics?.blobBytesReceived(buffer.count)
            buffer.removeAll(keepingCapacity: true)
        } catch {
            failure = APIError(.unavailable, "The blob could not be stored. Try again shortly.", retryAfter: 2)
        }
    }

    /// Makes the written bytes durable and moves `received` over them.
    private func commit() {
        guard failure == nil, written > offset else { return }
        do {
            guard try store.commit(sha, from: offset, to: written, owner: user, now: ServerTimestamp(clock.now()).rawValue) else {
                failure = APIError(.uploadOffsetMismatch, "Another upload of this blob went ahead; ask where it stands.")
                return
            }
            metrics?.blobBytesReceived(Int(written - offset))
            offset = written
        } catch {
            failure = APIError(.unavailable, "The blob could not be stored. Try again shortly.", retryAfter: 2)
        }
    }

    /// Stores what arrived and makes it durable; false when it could not be.
    @discardableResult
    private func flush() -> Bool {
        writeOut()
        commit()
        return failure == nil
    }

    /// The connection was cut before the body ended: keep what arrived.
    func abandon() {
        guard !finished else { return }
        finished = true
        flush()
    }

    /// Where the answer is counted (`/metrics`).
    var metrics: ServerMetrics?

    /// The body ended: the answer, counted by its result.
    func finish() -> HTTPResponse {
        let (response, result) = answerFinished()
        metrics?.blobUpload(result)
        return response
    }

    /// The answer and its result for the metrics: `complete`, `partial` or an error code.
    private func answerFinished() -> (HTTPResponse, String) {
        finished = true
        if failure == nil, seen < declared {
            failure = APIError(
                .invalidRequest, "The body is shorter than the \(declared) bytes declared.",
                fields: ["content-range": "is longer than the body"])
        }
        if let failure {
            if case .store = mode, failure.body.code == .invalidRequest { try? store.truncate(sha, to: start) }
            var response = SyncServer.errorResponse(failure, user: user)
            if failure.body.code == .uploadOffsetMismatch, let state = try? store.state(sha) {
                response.headers["Upload-Offset"] = String(state.received)
            }
            return (response, failure.body.code.rawValue)
        }
        do {
            switch mode {
            case .discard:
                return answer(received: size, complete: true)
            case .verify(let context):
                var digest = [UInt8](repeating: 0, count: 32)
                var length: UInt32 = 0
                guard EVP_DigestFinal_ex(context, &digest, &length) == 1, SHA256.hex(digest) == sha else {
                    return refused(APIError(.hashMismatch, "These bytes do not hash to the blob's name; nothing was stored."))
                }
                try store.addOwner(sha, user)
                return answer(received: size, complete: true)
            case .store:
                writeOut()
                if store.folder != nil, failure == nil, written == size {
                    // The last bytes came in this request: checked first, then
                    // synced and marked complete at once (no `received` step between).
                    guard try store.matches(sha, size: size) else {
                        try store.drop(sha)
                        return refused(
                            APIError(.hashMismatch, "The uploaded bytes do not hash to the blob's name; the upload was dropped."))
                    }
                    try store.complete(written: sha, owner: user, now: ServerTimestamp(clock.now()).rawValue)
                    metrics?.blobBytesReceived(Int(written - offset))
                    offset = written
                    return answer(received: size, complete: true)
                }
                guard flush() else { return answerFinished() }
                // An upload that stored bytes was recorded as an owner with them.
                if offset == start { try store.addOwner(sha, user) }
                guard offset == size else { return answer(received: offset, complete: false) }
                guard try store.matches(sha, size: size) else {
                    try store.drop(sha)
                    return refused(
                        APIError(.hashMismatch, "The uploaded bytes do not hash to the blob's name; the upload was dropped."))
                }
                try store.complete(sha, now: ServerTimestamp(clock.now()).rawValue)
                return answer(received: size, complete: true)
            }
        } catch {
            return (
                SyncServer.errorResponse(APIError.unavailable, user: user, cause: String(describing: error)),
                ErrorCode.unavailable.rawValue
            )
        }
    }

    private func refused(_ error: APIError) -> (HTTPResponse, String) {
        (SyncServer.errorResponse(error, user: user), error.body.code.rawValue)
    }

    private func answer(received: Int64, complete: Bool) -> (HTTPResponse, String) {
        var response = HTTPResponse.json(
            200, Array(#"{"sha256":"\#(sha)","size":\#(size),"received":\#(received),"complete":\#(complete)}"#.utf8),
            user: user)
        response.headers["Upload-Offset"] = String(received)
        return (response, complete ? "complete" : "partial")
    }
}

/// `Content-Range: bytes <first>-<last>/<total>` of an upload.
struct ContentRange: Equatable {
    var first: Int64
    var last: Int64
    var total: Int64

    init(_ text: String) throws {
        let invalid = APIError(
            .invalidRequest, "Content-Range must read 'bytes <first>-<last>/<total>' with first ≤ last < total.",
            fields: ["content-range": "is not 'bytes <first>-<last>/<total>'"])
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.hasPrefix("bytes ") else { throw invalid }
        let parts = trimmed.dropFirst(6).split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let total = Int64(parts[1]) else { throw invalid }
        let bounds = parts[0].split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Int64(bounds[0]), let last = Int64(bounds[1]),
            first >= 0, first <= last, last < total
        else { throw invalid }
        self.first = first
        self.last = last
        self.total = total
    }
}
