public import Foundation

/// One HTTP request the sync engine sends.
public struct TransportRequest: Sendable, Equatable {
    /// The HTTP method, e.g. `GET` or `POST`.
    public var method: String
    /// Path and query, e.g. `/v1/pull?cursor=abc`.
    public var target: String
    /// Header fields to send, by name.
    public var headers: [String: String]
    /// The request body, or nil for none.
    public var body: Data?
    /// Per-request timeout: past it the outcome is unknown.
    public var timeout: TimeInterval

    /// Creates a request; `timeout` is in seconds.
    public init(method: String, target: String, headers: [String: String] = [:], body: Data? = nil, timeout: TimeInterval) {
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// The answer to a request.
public struct TransportResponse: Sendable, Equatable {
    /// The HTTP status code.
    public var status: Int
    /// Header names in lowercase.
    public var headers: [String: String]
    /// The response body; empty when there is none.
    public var body: Data

    /// Creates a response; header names are stored in lowercase.
    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { _, last in last })
        self.body = body
    }
}

/// Why a request produced no answer. What matters to sync is whether the
/// server may have received it.
public enum TransportError: Error, Sendable, Equatable {
    /// The request surely did not reach the server: no network, host not
    /// found, connection refused.
    case notSent(String)
    /// The request may have reached the server but no answer came: timeout,
    /// connection lost mid-way. A push must be resent with the same seq.
    case noAnswer(String)
    /// The caller gave up (the coordinator moved on to a new cycle).
    case cancelled
    /// This transport cannot hold a response open (an in-process test
    /// transport): the live channel long-polls instead.
    case streamsUnsupported
}

/// What a request's sender learns before its answer is whole, in order:
/// `bodySent`, then `head` and right after it `headers` (a server may
/// answer before it has read the whole body: then the head comes alone).
public enum RequestProgress: Sendable, Equatable {
    /// The request's body has been handed to the network in full.
    case bodySent
    /// The answer's head arrived with this status; its body may still be coming.
    case head(Int)
    /// The answer's headers (names in lowercase), told right after `head`:
    /// a pull's answer names the next page's cursor there, so the next
    /// request can leave while this body is still arriving.
    case headers([String: String])
}

/// A response whose body keeps arriving (`GET /v1/stream`).
public struct TransportStream: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// Header names in lowercase.
    public var headers: [String: String]
    /// The body's bytes as they arrive. It finishes when the server closes
    /// the response and throws a ``TransportError`` when the connection
    /// fails; ending the iteration (or cancelling its task) closes it.
    public var bytes: AsyncThrowingStream<Data, any Error>

    /// Creates a stream answer; header names are stored in lowercase.
    public init(status: Int, headers: [String: String], bytes: AsyncThrowingStream<Data, any Error>) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { _, last in last })
        self.bytes = bytes
    }
}

/// How the sync engine talks to the server: a live implementation over
/// URLSession, and test implementations that call the server in process or
/// inject faults.
public protocol SyncTransport: Sendable {
    /// Sends `request` and returns the server's answer; throws a `TransportError` when no answer came.
    func send(_ request: TransportRequest) async throws -> TransportResponse

    /// Sends `request` like ``send(_:)``, and tells `progress` what happens
    /// before the answer is whole: when the request's body has gone out, and
    /// the answer's status the moment its head arrives, while its body may
    /// still be on the way. The sync engine sends its next push on the head
    /// (the server answers a push only once it is done with it, so the push
    /// after it can travel while this answer's bytes do), and reads and
    /// settles an answer only once the push after it has gone out.
    func send(_ request: TransportRequest, progress: @escaping @Sendable (RequestProgress) -> Void) async throws
        -> TransportResponse

    /// Sends `request` and returns as soon as the answer's status and
    /// headers arrive, with its body still coming. `request.timeout` bounds
    /// the wait for the headers only.
    func openStream(_ request: TransportRequest) async throws -> TransportStream
}

extension SyncTransport {
    /// By default the request counts as sent when it is handed over, and
    /// the head and headers are known when the whole answer is.
    public func send(_ request: TransportRequest, progress: @escaping @Sendable (RequestProgress) -> Void) async throws
        -> TransportResponse
    {
        progress(.bodySent)
        let response = try await send(request)
        progress(.head(response.status))
        progress(.headers(response.headers))
        return response
    }

    /// By default a transport cannot stream: the live channel long-polls.
    public func openStream(_ request: TransportRequest) async throws -> TransportStream {
        throw TransportError.streamsUnsupported
    }
}
