import Foundation
import OutpostCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A URLSession whose answers are read through its data delegate, so the
/// moments a request's body has gone out and its answer's head arrived are
/// known before the answer is whole (`URLSession.answer(to:)`, with a
/// completion handler, tells only the end).
/// A push answer of 500 results is about 290 kB: on loopback its body took
/// 1.2-2 ms to reach the engine after the head, time the server spent idle
/// while the engine waited to send the next push.
final class SessionAnswers: NSObject, URLSessionDataDelegate, Sendable {
    private struct Pending {
        var continuation: CheckedContinuation<(Data, URLResponse), any Error>
        /// Told `bodySent` once (`bodySent` says whether it was) and each head.
        var progress: (@Sendable (RequestProgress) -> Void)?
        var bodySent = false
        var response: URLResponse?
        var body = Data()
    }

    private let tasks = Locked<[Int: Pending]>([:])
    // Made once in `init` and never replaced; URLSession is thread-safe.
    nonisolated(unsafe) private var session: URLSession!

    init(configuration: URLSessionConfiguration) {
        super.init()
        session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
    }

    /// Lets requests under way finish, then releases the session.
    func invalidate() { session.finishTasksAndInvalidate() }

    /// The answer's body and head, as `URLSession.answer(to:)` gives them;
    /// `progress` is told when the body has gone out and the status as soon
    /// as it is known.
    /// Cancelling the calling task cancels the request (on another queue:
    /// see `URLSession.answer(to:)`).
    func answer(to request: URLRequest, progress: (@Sendable (RequestProgress) -> Void)?) async throws -> (Data, URLResponse) {
        let pending = PendingSessionTask()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = session.dataTask(with: request)
                tasks.withLock { $0[task.taskIdentifier] = Pending(continuation: continuation, progress: progress) }
                pending.start(task)
            }
        } onCancel: {
            pending.cancel()
        }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        // A server may answer before it has read the whole body.
        bodySent(dataTask.taskIdentifier)
        // A redirect or an interim answer may come before the last head: the latest one is the answer's.
        let progress = tasks.withLock { state -> (@Sendable (RequestProgress) -> Void)? in
            state[dataTask.taskIdentifier]?.response = response
            state[dataTask.taskIdentifier]?.body.removeAll(keepingCapacity: true)
            return state[dataTask.taskIdentifier]?.progress
        }
        completionHandler(.allow)
        // Called outside the lock: the engine may start its next request from it.
        let http = response as? HTTPURLResponse
        progress?(.head(http?.statusCode ?? 0))
        progress?(.headers(SessionAnswers.headers(of: http)))
    }

    /// An answer's headers, names in lowercase.
    static func headers(of response: HTTPURLResponse?) -> [String: String] {
        var headers: [String: String] = [:]
        for (key, value) in response?.allHeaderFields ?? [:] {
            if let key = key as? String, let value = value as? String { headers[key.lowercased()] = value }
        }
        return headers
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        // Told once per request, however often the whole count is repeated.
        guard totalBytesExpectedToSend > 0, totalBytesSent >= totalBytesExpectedToSend else { return }
        bodySent(task.taskIdentifier)
    }

    /// Tells the request's waiter, once, that its body is out: when the
    /// delegate says so, or when the answer's head comes first.
    private func bodySent(_ task: Int) {
        let progress = tasks.withLock { state -> (@Sendable (RequestProgress) -> Void)? in
            guard state[task]?.bodySent == false else { return nil }
            state[task]?.bodySent = true
            return state[task]?.progress
        }
        progress?(.bodySent)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        tasks.withLock { $0[dataTask.taskIdentifier]?.body.append(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let pending = tasks.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        if let error {
            pending.continuation.resume(throwing: error)
        } else if let response = pending.response {
            pending.continuation.resume(returning: (pending.body, response))
        } else {
            pending.continuation.resume(throwing: URLError(.badServerResponse))
        }
    }
}
