public import Foundation
import OutpostCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The live transport: URLSession (FoundationNetworking on Linux), with the
/// per-request timeout and cancellation the sync engine asks for.
public final class URLSessionTransport: SyncTransport {
    /// The server's address; request targets are resolved against it.
    public let baseURL: URL
    /// Every request but uploads: read through a delegate, so a push's
    /// answer tells its status before its body is whole.
    private let answers: SessionAnswers
    /// Attachment uploads only (`PUT`): each on a connection of its own,
    /// never one that other requests left open (see ``send(_:)``).
    private let uploadSession = Locked<URLSession?>(nil)
    /// The session for streams, made on the first stream: most transports
    /// (the CLI, tests, a device in the background) never open one.
    private let streamSession = Locked<URLSessionStreams?>(nil)

    private var streams: URLSessionStreams {
        streamSession.withLock { session in
            if let session { return session }
            let made = URLSessionStreams()
            session = made
            return made
        }
    }

    /// Creates a transport for the server at `baseURL`, with no caching and no waiting for connectivity.
    public init(baseURL: URL) {
        self.baseURL = baseURL
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpMaximumConnectionsPerHost = 4
        #if canImport(Darwin)
        // A device that lost its network should fail fast, not wait for it.
        configuration.waitsForConnectivity = false
        #endif
        self.answers = SessionAnswers(configuration: configuration)
    }

    deinit {
        answers.invalidate()
        uploadSession.current?.finishTasksAndInvalidate()
        streamSession.current?.invalidate()
    }

    /// Opens `request` as a stream: returns once the status and headers
    /// arrive (within `request.timeout`), the body arriving as it comes.
    public func openStream(_ request: TransportRequest) async throws -> TransportStream {
        // The headers' wait is bounded by `request.timeout`; the body's, by the heartbeat watchdog.
        let urlRequest = try self.urlRequest(request, timeout: 24 * 3600)
        do {
            return try await streams.open(urlRequest, headerTimeout: request.timeout)
        } catch {
            throw Self.transportError(error)
        }
    }

    /// What every request and stream says it reads (`Accept-Encoding`).
    package static let acceptEncoding = "gzip, deflate"

    private func urlRequest(_ request: TransportRequest, timeout: TimeInterval) throws -> URLRequest {
        guard let url = URL(string: request.target, relativeTo: baseURL) else {
            throw TransportError.notSent("the address \(request.target) is not valid")
        }
        var urlRequest = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        urlRequest.httpMethod = request.method
        // Answers and streams compressed: URLSession inflates them itself
        // (Foundation on Apple platforms, libcurl in FoundationNetworking).
        urlRequest.setValue(Self.acceptEncoding, forHTTPHeaderField: "Accept-Encoding")
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        // An attachment's piece on a connection of its own (see ``send(_:)``).
        if request.method == "PUT" { urlRequest.setValue("close", forHTTPHeaderField: "Connection") }
        urlRequest.httpBody = request.body
        return urlRequest
    }

    /// Any failure of a request, in the words that matter to sync.
    private static func transportError(_ error: any Error) -> TransportError {
        switch error {
        case let error as TransportError: return error
        case is CancellationError: return .cancelled
        case let error as URLError: return classify(error)
        default: return .noAnswer(String(describing: error))
        }
    }

    /// The session for uploads, made on the first one.
    private var uploads: URLSession {
        uploadSession.withLock { session in
            if let session { return session }
            let configuration = URLSessionConfiguration.ephemeral
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            configuration.urlCache = nil
            configuration.httpMaximumConnectionsPerHost = 2
            let made = URLSession(configuration: configuration)
            session = made
            return made
        }
    }

    /// Sends `request`, ending it at its timeout; failures are classified as `TransportError`s.
    ///
    /// A `PUT` (an attachment's piece) goes through a session of its own:
    /// when a reused connection dies mid-body, Foundation on Linux sends
    /// the request again by itself on a new one, and that body did not
    /// start at its beginning (the server stored bytes at the wrong
    /// offsets), or it stalled until the server gave up on it.
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
        let urlRequest = try self.urlRequest(request, timeout: request.timeout)
        let uploads = request.method == "PUT" ? self.uploads : nil
        do {
            let (data, response) = try await withDeadline(request.timeout) { [answers, uploads, urlRequest] in
                if let uploads {
                    // Its own session tells nothing early: both moments once the answer is whole.
                    let (data, response) = try await uploads.answer(to: urlRequest)
                    progress?(.bodySent)
                    progress?(.head((response as? HTTPURLResponse)?.statusCode ?? 0))
                    progress?(.headers(SessionAnswers.headers(of: response as? HTTPURLResponse)))
                    return (data, response)
                }
                return try await answers.answer(to: urlRequest, progress: progress)
            }
            guard let http = response as? HTTPURLResponse else { throw TransportError.noAnswer("not an HTTP answer") }
            var headers: [String: String] = [:]
            for (key, value) in http.allHeaderFields {
                if let key = key as? String, let value = value as? String { headers[key] = value }
            }
            return TransportResponse(status: http.statusCode, headers: headers, body: data)
        } catch {
            throw Self.transportError(error)
        }
    }

    /// URLSession's timeout counts idle time; a socket that accepted the
    /// request and then went silent must still end at the deadline.
    private func withDeadline<T: Sendable>(_ seconds: TimeInterval, _ body: @escaping @Sendable () async throws -> T)
        async throws -> T
    {
        try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
                throw TransportError.noAnswer("no answer within \(seconds) seconds")
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw TransportError.cancelled }
            return first
        }
    }

    /// Whether the request may have reached the server decides everything:
    /// only failures before a connection existed are "not sent".
    public static func classify(_ error: URLError) -> TransportError {
        switch error.code {
        case .cancelled:
            return .cancelled
        case .notConnectedToInternet, .cannotFindHost, .cannotConnectToHost, .dnsLookupFailed,
            .internationalRoamingOff, .callIsActive, .dataNotAllowed, .secureConnectionFailed,
            .appTransportSecurityRequiresSecureConnection:
            return .notSent(error.localizedDescription)
        default:
            return .noAnswer(error.localizedDescription)
        }
    }
}
