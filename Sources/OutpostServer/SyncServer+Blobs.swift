import Foundation
import OutpostCore

extension SyncServer {
    /// `PUT /v1/blobs/{sha256}` (docs/protocol.md, "Attachments"): checked
    /// from its headers; on a socket its body then streams to storage.
    func startBlobUpload(_ request: RouteRequest) throws -> BlobUpload.Start {
        try BlobUpload.begin(request, server: self)
    }

    /// `HEAD` and `GET /v1/blobs/{sha256}`: a blob's bytes (or a range of
    /// them) for whoever may read it.
    func blob(_ route: RouteRequest) throws -> HTTPResponse {
        let request = route.http
        let principal = try route.caller()
        let user = route.user
        guard let sha = BlobUpload.name(route.parameter("sha256")) else {
            throw APIError(
                .invalidRequest, "A blob is named by the SHA-256 of its bytes: 64 hexadecimal digits.",
                fields: ["sha256": "must be 64 hexadecimal digits"])
        }
        // Someone else's blob is "not found", as records outside the scope are.
        guard let state = try blobs.state(sha), try canRead(sha, principal) else {
            throw APIError(.notFound, "No such blob.")
        }
        guard state.complete else {
            // "Not found", saying how much is held when anything is.
            var response = Self.errorResponse(APIError(.notFound, "This blob is not complete yet."), user: user)
            if state.received > 0 { response.headers["Upload-Offset"] = String(state.received) }
            return response
        }
        var headers = ["Cache-Control": "private, max-age=31536000, immutable", "Accept-Ranges": "bytes"]
        headers["Content-Type"] = state.contentType ?? "application/octet-stream"
        if request.method == "HEAD" {
            var response = HTTPResponse(status: 200, headers: headers, user: user)
            response.declaredLength = state.size
            return response
        }
        var first: Int64 = 0
        var last = state.size - 1
        var status = 200
        if let range = request.headers["range"] {
            guard let parsed = Self.byteRange(range, size: state.size) else {
                var response = Self.errorResponse(
                    APIError(.invalidRequest, "The Range cannot be served from a blob of \(state.size) bytes."), user: user)
                response.status = 416
                response.headers["Content-Range"] = "bytes */\(state.size)"
                return response
            }
            (first, last, status) = (parsed.first, parsed.last, 206)
            headers["Content-Range"] = "bytes \(first)-\(last)/\(state.size)"
        }
        if request.fromSocket, let reader = blobs.bodyReader(sha, first: first, length: last - first + 1) {
            // On a socket the bytes go out as it takes them, never whole in memory.
            var response = HTTPResponse(status: status, headers: headers, user: user)
            response.bodyReader = reader
            return response
        }
        var body: [UInt8] = []
        body.reserveCapacity(Int(last - first + 1))
        try blobs.read(sha, from: first, to: last + 1) { body.append(contentsOf: $0) }
        return HTTPResponse(status: status, headers: headers, body: body, user: user)
    }

    /// Whether `principal` may read the blob: they uploaded its bytes, or
    /// they can read a live record that names it.
    func canRead(_ sha: String, _ principal: Principal) throws -> Bool {
        if try blobs.isOwner(sha, principal.user) { return true }
        let scope = Scope(principal: principal, config: config)
        return try database.read { sql in
            for row in try sql.query("SELECT collection, uuid FROM blob_refs WHERE sha256 = ? LIMIT 100", [.text(sha)]) {
                if let record = try sql.record(row.string(0), row.string(1)), !record.deleted, scope.canRead(record) {
                    return true
                }
            }
            return false
        }
    }

    /// `bytes=a-b`, `bytes=a-` or `bytes=-n` within a blob of `size` bytes; nil when it cannot be served.
    static func byteRange(_ header: String, size: Int64) -> (first: Int64, last: Int64)? {
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.hasPrefix("bytes="), size > 0, !text.contains(",") else { return nil }
        let bounds = text.dropFirst(6).split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard bounds.count == 2 else { return nil }
        if bounds[0].isEmpty {
            guard let suffix = Int64(bounds[1]), suffix > 0 else { return nil }
            return (max(0, size - suffix), size - 1)
        }
        guard let first = Int64(bounds[0]), first < size else { return nil }
        if bounds[1].isEmpty { return (first, size - 1) }
        guard let last = Int64(bounds[1]), last >= first else { return nil }
        return (first, min(last, size - 1))
    }
}

extension SyncServer {
    /// Whether the server holds a blob whole, of `size` bytes, hashing to
    /// its name (the simulation's checker asks for every attachment a live
    /// record names).
    package func holdsIntactBlob(_ sha: String, size: Int64) throws -> Bool {
        guard let state = try blobs.state(sha), state.complete, state.size == size else { return false }
        return try blobs.matches(sha, size: size)
    }
}
