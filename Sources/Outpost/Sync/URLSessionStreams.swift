import Foundation
import OutpostCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Responses whose bodies keep arriving, over URLSession: a session with a
/// data delegate hands each piece of a task's body to that task's stream
/// as it arrives (`data(for:)` would wait for the end, which a live stream
/// never reaches).
final class URLSessionStreams: NSObject, URLSessionDataDelegate, Sendable {
    private struct Pending {
        /// Resumed with the answer's status and headers when they arrive.
        var headers: CheckedContinuation<(status: Int, headers: [String: String]), any Error>?
        var body: AsyncThrowingStream<Data, any Error>.Continuation
    }

    private let tasks = Locked<[Int: Pending]>([:])
    // Made once in `init` and never replaced; URLSession is thread-safe.
    nonisolated(unsafe) private var session: URLSession!

    override init() {
        super.init()
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        // A stream is idle between events: its liveness is the heartbeat's
        // business, not the request timeout's.
        configuration.timeoutIntervalForRequest = 24 * 3600
        configuration.timeoutIntervalForResource = 24 * 3600
        #if canImport(Darwin)
        configuration.waitsForConnectivity = false
        #endif
        session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
    }

    /// Lets open streams run to their end, then releases the session.
    func invalidate() { session.finishTasksAndInvalidate() }

    func open(_ urlRequest: URLRequest, headerTimeout: TimeInterval) async throws -> TransportStream {
        let task = session.dataTask(with: urlRequest)
        let id = task.taskIdentifier
        let (body, bodyContinuation) = AsyncThrowingStream.makeStream(of: Data.self, throwing: (any Error).self)
        bodyContinuation.onTermination = { [weak task] _ in task?.cancel() }
        let timer = Task {
            try await Task.sleep(for: .milliseconds(Int64(headerTimeout * 1000)))
            self.fail(id, TransportError.noAnswer("no answer within \(headerTimeout) seconds"))
        }
        defer { timer.cancel() }
        let head = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                tasks.withLock { $0[id] = Pending(headers: continuation, body: bodyContinuation) }
                task.resume()
            }
        } onCancel: {
            task.cancel()
        }
        return TransportStream(status: head.status, headers: head.headers, bytes: body)
    }

    private func fail(_ id: Int, _ error: TransportError) {
        let pending = tasks.withLock { $0.removeValue(forKey: id) }
        pending?.headers?.resume(throwing: error)
        pending?.body.finish(throwing: error)
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        let waiting = tasks.withLock { state -> CheckedContinuation<(status: Int, headers: [String: String]), any Error>? in
            defer { state[dataTask.taskIdentifier]?.headers = nil }
            return state[dataTask.taskIdentifier]?.headers
        }
        var headers: [String: String] = [:]
        let http = response as? HTTPURLResponse
        for (key, value) in http?.allHeaderFields ?? [:] {
            if let key = key as? String, let value = value as? String { headers[key] = value }
        }
        waiting?.resume(returning: (http?.statusCode ?? 0, headers))
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let body = tasks.withLock { $0[dataTask.taskIdentifier]?.body }
        body?.yield(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let pending = tasks.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        guard let pending else { return }
        if let error {
            let failure: TransportError =
                (error as? URLError).map(URLSessionTransport.classify) ?? .noAnswer(String(describing: error))
            pending.headers?.resume(throwing: failure)
            pending.body.finish(throwing: failure)
        } else {
            pending.headers?.resume(throwing: TransportError.noAnswer("the connection closed before an answer"))
            pending.body.finish()
        }
    }
}
