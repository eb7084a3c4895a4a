import Foundation
import OutpostCore

/// The protocol's endpoints as typed calls over a `SyncTransport`. Every
/// answer is either the decoded body or a `SyncFailure`.
struct ServerClient: Sendable {
    let transport: any SyncTransport
    let token: String?
    var timeout: TimeInterval
    let clock: any MonotonicClock
    /// `Outpost-Schema` and `Outpost-Client`, sent on every request.
    var identity: [String: String] = [:]
    /// What the server said it reads, kept across calls (the engine's).
    var encodings = RequestEncodings()

    /// A decoded answer and how long it took (connectivity uses the latency).
    struct Answer<Body: Sendable>: Sendable {
        var body: Body
        var latency: Duration
    }

    /// A failure with the time it took to fail.
    struct Failure: Error {
        var failure: SyncFailure
        var latency: Duration
    }

    /// A push whose body was written beforehand (`PushBatch.body`, deflated
    /// when the server reads deflate: `RequestEncodings`), answered
    /// as bytes: the engine sends the next push the moment this one's head
    /// says 200, and reads these bytes (`readPush`) once that one's body is out.
    /// `progress`: when the body has gone out, and the answer's status the moment its head arrives.
    func push(body: OutgoingBody, progress: @escaping @Sendable (RequestProgress) -> Void) async throws -> Answer<Data> {
        guard let encoding = body.encoding else {
            return try await call("POST", "/v1/push", body: body.plain, progress: progress) { $0 }
        }
        do {
            return try await call("POST", "/v1/push", body: body.sent, encoding: encoding, progress: progress) { $0 }
        } catch let failure as Failure {
            // Turned down whole (a server that does not read the encoding,
            // or a proxy that mangled it): nothing was applied, so the same
            // push goes again at once, plain, and so do the ones after it.
            guard case .refused(let error) = failure.failure, Self.refusesEncoding.contains(error.code) else { throw failure }
            encodings.forget()
            return try await call("POST", "/v1/push", body: body.plain, progress: progress) { $0 }
        }
    }

    /// A push's answer read as results. Without Codable (see PushWire.swift);
    /// an answer the fast reader refuses goes through the decoder for its error.
    static func readPush(_ answer: Answer<Data>) throws -> Answer<PushResponse> {
        do {
            let body = answer.body
            return Answer(
                body: try PushResponse.readWire([UInt8](body), deferringAppliedData: true)
                    ?? WireCoding.decode(PushResponse.self, from: body),
                latency: answer.latency)
        } catch {
            throw Failure(failure: .invalidAnswer("\(error)"), latency: answer.latency)
        }
    }

    /// A page after `cursor`; with `wait`, the server holds the request up
    /// to that many seconds until there is one (a long poll).
    /// `own`: this client and the seq through which its store holds the
    /// answers of its own changes; the server leaves those writes out.
    /// `nextCursor`: told the next page's cursor when the answer's headers
    /// name it, before its body is whole.
    func pull(
        collections: [String], cursor: PullCursor?, limit: Int, windowStart: ServerTimestamp?, wait: Int? = nil,
        own: (client: UUID, through: Int64)? = nil, nextCursor: (@Sendable (PullCursor) -> Void)? = nil
    ) async throws -> Answer<RawPullPage> {
        var target = "/v1/pull?collections=\(collections.joined(separator: ","))&limit=\(limit)"
        if let cursor { target += "&cursor=\(Self.escape(cursor.rawValue))" }
        if let own { target += "&client_id=\(own.client.wireText)&own_through=\(own.through)" }
        if let windowStart { target += "&window_start=\(Self.escape(windowStart.rawValue))" }
        if let wait { target += "&wait=\(wait)" }
        guard let nextCursor else { return try await call("GET", target) { try RawPullPage.parse($0) } }
        return try await call(
            "GET", target,
            progress: { progress in
                if case .headers(let headers) = progress, let next = headers[PullHeaders.nextCursor.lowercased()], !next.isEmpty {
                    nextCursor(PullCursor(rawValue: next))
                }
            }
        ) { try RawPullPage.parse($0) }
    }

    /// The request headers every call carries.
    func headers(accept: String) -> [String: String] {
        var headers = identity
        headers["Accept"] = accept
        if let token { headers["Authorization"] = "Bearer \(token)" }
        return headers
    }

    func scope(windowStart: ServerTimestamp? = nil) async throws -> Answer<ScopeResponse> {
        try await call("GET", "/v1/scope" + (windowStart.map { "?window_start=\(Self.escape($0.rawValue))" } ?? ""))
    }

    func health() async throws -> Answer<HealthResponse> {
        try await call("GET", "/v1/health")
    }

    func search(collection: String, query: String, limit: Int) async throws -> Answer<SearchResponse> {
        try await call("GET", "/v1/search?collection=\(collection)&q=\(Self.escape(query))&limit=\(limit)")
    }

    func record(collection: String, uuid: UUID) async throws -> Answer<WireRecord> {
        try await call("GET", "/v1/records/\(collection)/\(uuid.wireText)")
    }

    // MARK: Blobs (attachments): answers whose status the caller reads

    /// `HEAD /v1/blobs/{sha256}`: 200 when the server holds it whole, 404
    /// with `Upload-Offset` when it holds a part.
    func blobHead(_ sha: String) async throws -> TransportResponse {
        try await exchange("HEAD", "/v1/blobs/\(sha)", headers: headers(accept: "application/json"), body: nil, timeout: timeout)
    }

    /// `PUT /v1/blobs/{sha256}` of `bytes` from `offset` of a blob of `total` bytes.
    func blobPut(_ attachment: AttachedFile, offset: Int64, bytes: Data, timeout: TimeInterval) async throws -> TransportResponse {
        var headers = headers(accept: "application/json")
        headers["Content-Type"] = attachment.contentType
        if !bytes.isEmpty {
            headers["Content-Range"] = "bytes \(offset)-\(offset + Int64(bytes.count) - 1)/\(attachment.size)"
        }
        return try await exchange("PUT", "/v1/blobs/\(attachment.sha256)", headers: headers, body: bytes, timeout: timeout)
    }

    /// `GET /v1/blobs/{sha256}` of the bytes `first...last`.
    func blobGet(_ sha: String, first: Int64, last: Int64, timeout: TimeInterval) async throws -> TransportResponse {
        var headers = headers(accept: "*/*")
        headers["Range"] = "bytes=\(first)-\(last)"
        return try await exchange("GET", "/v1/blobs/\(sha)", headers: headers, body: nil, timeout: timeout)
    }

    /// One request whatever its status; only "no answer" throws, as a `Failure`.
    private func exchange(
        _ method: String, _ target: String, headers: [String: String], body: Data?, timeout: TimeInterval
    ) async throws -> TransportResponse {
        let started = clock.now()
        do {
            return try await transport.send(
                TransportRequest(method: method, target: target, headers: headers, body: body, timeout: timeout))
        } catch let error as TransportError {
            let latency = clock.now() - started
            switch error {
            case .notSent: throw Failure(failure: .offline, latency: latency)
            case .noAnswer, .cancelled, .streamsUnsupported: throw Failure(failure: .noAnswer, latency: latency)
            }
        }
    }

    private func call<Body: Decodable & Sendable>(_ method: String, _ target: String, body: Data? = nil) async throws
        -> Answer<Body>
    {
        try await call(method, target, body: body) { try WireCoding.decode(Body.self, from: $0) }
    }

    private func call<Body: Sendable>(
        _ method: String, _ target: String, body: Data? = nil, encoding: String? = nil,
        progress: @escaping @Sendable (RequestProgress) -> Void = { _ in }, decode: (Data) throws -> Body
    ) async throws -> Answer<Body> {
        var headers = identity
        headers["Accept"] = "application/json"
        if let token { headers["Authorization"] = "Bearer \(token)" }
        if body != nil { headers["Content-Type"] = "application/json" }
        if let encoding { headers["Content-Encoding"] = encoding }
        let started = clock.now()
        let response: TransportResponse
        do {
            response = try await transport.send(
                TransportRequest(method: method, target: target, headers: headers, body: body, timeout: timeout),
                progress: progress)
        } catch let error as TransportError {
            let latency = clock.now() - started
            switch error {
            case .notSent: throw Failure(failure: .offline, latency: latency)
            case .noAnswer, .cancelled, .streamsUnsupported: throw Failure(failure: .noAnswer, latency: latency)
            }
        }
        let latency = clock.now() - started
        encodings.learn(response.headers["accept-encoding"])
        guard response.status == 200 else { throw Failure(failure: Self.failure(for: response), latency: latency) }
        do {
            return Answer(body: try decode(response.body), latency: latency)
        } catch {
            throw Failure(failure: .invalidAnswer("\(error)"), latency: latency)
        }
    }

    /// Refusals of a whole encoded request that the encoding may explain:
    /// ours, an older server's (which reads the bytes as JSON), a proxy's.
    static let refusesEncoding: Set<ErrorCode> = [
        .unsupportedEncoding, .invalidJSON, .invalidRequest, ErrorCode("http_400"), ErrorCode("http_415"),
    ]

    static func failure(for response: TransportResponse) -> SyncFailure {
        let body = try? WireCoding.decode(ErrorBody.self, from: response.body)
        let retryAfter = response.headers["retry-after"].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        switch (response.status, body?.code) {
        case (401, _): return .signInRequired
        case (426, _): return .updateRequired
        case (403, .tokenRevoked?): return .accessRevoked
        case (429, _), (500...599, _): return .serverBusy(retryAfter: retryAfter)
        case (410, _): return .refused(body ?? ErrorBody(code: .resyncRequired, message: "Resync required."))
        default:
            return .refused(body ?? ErrorBody(code: ErrorCode("http_\(response.status)"), message: "The server answered \(response.status)."))
        }
    }

    static func escape(_ text: String) -> String {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&+=?#")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
