#if canImport(CCurl)
import CCurl
public import Foundation
import OutpostCore

/// The live transport on Linux: libcurl's multi interface, on one thread
/// that sleeps until a socket has something to do.
///
/// FoundationNetworking wraps the same library, but its dispatch sources
/// re-arm each socket for writing without end: an idle open stream kept
/// most of a core busy. Here an idle stream costs nothing, a request's
/// body is read straight from its `Data`, and answers' heads are told as
/// they arrive. Answers are offered compressed (`gzip, deflate`) and
/// handed over inflated: a whole answer by libdeflate in one call on the
/// caller's thread, a stream's events by libcurl as soon as their bytes arrive.
public final class CurlTransport: SyncTransport {
    /// The server's address; request targets are resolved against it.
    public let baseURL: URL
    /// A PEM file of the certificates trusted for HTTPS instead of the
    /// system's, or nil for the system's.
    public let trustedCertificates: String?
    /// Made on the first request: a transport never used starts no thread.
    private let started = Locked<CurlLoop?>(nil)

    /// Creates a transport for the server at `baseURL`. `trustedCertificates`
    /// is the path of a PEM file of certificate authorities to trust
    /// instead of the system's (a server with a certificate of its own CA).
    public convenience init(baseURL: URL, trustedCertificates: String? = nil) {
        self.init(baseURL: baseURL, trustedCertificates: trustedCertificates, decodedLimit: Self.defaultDecodedLimit)
    }

    /// The most bytes a compressed whole answer may inflate to: a few bytes
    /// that would inflate to gigabytes (a zip bomb) are refused before the
    /// memory is taken. A pull page of 5,000 records is about 2 MB.
    package let decodedLimit: Int
    package static let defaultDecodedLimit = 256 << 20

    package init(baseURL: URL, trustedCertificates: String? = nil, decodedLimit: Int) {
        self.baseURL = baseURL
        self.trustedCertificates = trustedCertificates
        self.decodedLimit = decodedLimit
    }

    deinit { started.current?.stop() }

    private var loop: CurlLoop {
        started.withLock { loop in
            if let loop { return loop }
            // A few connections per host stay open for the next requests.
            let made = CurlLoop(idleConnections: 8)
            loop = made
            return made
        }
    }

    /// The CPU time of this transport's thread so far (zero before its first request).
    package var loopCPUTime: Duration { started.current?.cpuTime ?? .zero }

    /// Sends `request`, ending it at its timeout; failures are classified as `TransportError`s.
    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        try await exchange(request, progress: nil)
    }

    /// Sends `request`, telling `progress` when its body has gone out and
    /// the status as soon as the answer's head arrives, before its body is read.
    public func send(_ request: TransportRequest, progress: @escaping @Sendable (RequestProgress) -> Void) async throws
        -> TransportResponse
    {
        try await exchange(request, progress: progress)
    }

    private func exchange(_ request: TransportRequest, progress: (@Sendable (RequestProgress) -> Void)?) async throws
        -> TransportResponse
    {
        let exchange = try CurlExchange(
            request, baseURL: baseURL, trustedCertificates: trustedCertificates, stream: false, progress: progress)
        let loop = self.loop
        let response = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                exchange.waiter = .answer(continuation)
                loop.submit(exchange)
            }
        } onCancel: {
            loop.cancel(exchange, .cancelled)
        }
        return try decoded(response)
    }

    /// The answer with its body inflated, on the caller's thread: pages
    /// read ahead are inflated side by side, not one after the other on
    /// the loop's. A body that does not decode is an answer that did not
    /// come whole; nothing of it is handed on.
    package func decoded(_ response: TransportResponse) throws -> TransportResponse {
        guard AnswerInflater.isAvailable, let codings = response.headers["content-encoding"] else { return response }
        var response = response
        do {
            response.body = try AnswerInflater.decode(response.body, codings: codings, limit: decodedLimit)
        } catch .tooLarge {
            throw TransportError.noAnswer("the answer (\(codings)) inflates to more than \(decodedLimit) bytes")
        } catch {
            throw TransportError.noAnswer("the answer's body is not valid \(codings)")
        }
        return response
    }

    /// Opens `request` as a stream: returns once the status and headers
    /// arrive (within `request.timeout`), the body arriving as it comes.
    /// Ending the iteration of its bytes, or cancelling the task, closes it.
    public func openStream(_ request: TransportRequest) async throws -> TransportStream {
        let exchange = try CurlExchange(
            request, baseURL: baseURL, trustedCertificates: trustedCertificates, stream: true, progress: nil)
        let loop = self.loop
        let (bytes, body) = AsyncThrowingStream.makeStream(of: Data.self, throwing: (any Error).self)
        body.onTermination = { _ in loop.cancel(exchange, .cancelled) }
        let head = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                exchange.waiter = .stream(head: continuation, body: body)
                loop.submit(exchange)
            }
        } onCancel: {
            loop.cancel(exchange, .cancelled)
        }
        return TransportStream(status: head.status, headers: head.headers, bytes: bytes)
    }

    /// What a failed transfer means to sync: only failures before a
    /// connection existed are "not sent"; past that, the server may have
    /// the request. `code` is libcurl's `CURLcode`; `connected` whether a
    /// connection was made; `timeout` the request's, for the message.
    package static func classify(code: Int, message: String, connected: Bool, timeout: TimeInterval) -> TransportError {
        switch code {
        case Int(CURLE_PEER_FAILED_VERIFICATION.rawValue):
            return .notSent("the server's certificate is not trusted (\(message))")
        case Int(CURLE_SSL_CACERT_BADFILE.rawValue):
            return .notSent("the trusted certificates file cannot be read (\(message))")
        case Int(CURLE_SSL_CONNECT_ERROR.rawValue), Int(CURLE_SSL_CERTPROBLEM.rawValue), Int(CURLE_SSL_CIPHER.rawValue),
            Int(CURLE_SSL_ENGINE_NOTFOUND.rawValue), Int(CURLE_SSL_ENGINE_SETFAILED.rawValue),
            Int(CURLE_SSL_ENGINE_INITFAILED.rawValue), Int(CURLE_SSL_ISSUER_ERROR.rawValue),
            Int(CURLE_SSL_PINNEDPUBKEYNOTMATCH.rawValue), Int(CURLE_SSL_INVALIDCERTSTATUS.rawValue):
            return .notSent("the secure connection failed (\(message))")
        case Int(CURLE_COULDNT_RESOLVE_HOST.rawValue), Int(CURLE_COULDNT_RESOLVE_PROXY.rawValue):
            return .notSent("the server's host was not found (\(message))")
        case Int(CURLE_COULDNT_CONNECT.rawValue):
            return .notSent("could not connect to the server (\(message))")
        case Int(CURLE_UNSUPPORTED_PROTOCOL.rawValue), Int(CURLE_URL_MALFORMAT.rawValue):
            return .notSent("the address is not valid (\(message))")
        case Int(CURLE_OPERATION_TIMEDOUT.rawValue):
            // No connection in time: nothing of the request went out.
            if !connected { return .notSent("could not connect within \(timeout) seconds") }
            return .noAnswer("no answer within \(timeout) seconds")
        case Int(CURLE_SEND_FAIL_REWIND.rawValue):
            return .noAnswer("the connection closed while the body was being sent (\(message))")
        default:
            return .noAnswer(message)
        }
    }
}
#endif
