import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLSession {
    /// `data(for:)`, whose cancellation cannot stop the process.
    ///
    /// FoundationNetworking's `data(for:)` (Linux) cancels its session task
    /// from inside Swift's cancellation handler, that is while the cancelling
    /// thread holds the Swift task's status lock, and `URLSessionTask.cancel()`
    /// then waits for the session's work queue. When that queue is at the same
    /// moment handing the answer to the same Swift task, it needs that lock:
    /// each waits for the other for ever. On two cores two such pairs hold
    /// both threads of Swift's pool, and no task of the process runs again
    /// (it stopped `outpost bench` in a storm of devices whose requests were
    /// cancelled as their answers came). Here the handler only asks for the
    /// cancel, on another queue, and returns at once.
    func answer(to request: URLRequest) async throws -> (Data, URLResponse) {
        let pending = PendingSessionTask()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = dataTask(with: request) { data, response, error in
                    if let error {
                        continuation.resume(throwing: error)
                    } else if let response {
                        continuation.resume(returning: (data ?? Data(), response))
                    } else {
                        continuation.resume(throwing: URLError(.badServerResponse))
                    }
                }
                pending.start(task)
            }
        } onCancel: {
            pending.cancel()
        }
    }
}

/// A session task and whether its Swift task was cancelled, whichever
/// comes first.
final class PendingSessionTask: @unchecked Sendable {
    // @unchecked Sendable: both properties are only touched while `lock` is held.
    private let lock = NSLock()
    private var task: URLSessionTask?
    private var isCancelled = false

    func start(_ task: URLSessionTask) {
        lock.lock()
        self.task = task
        let cancelled = isCancelled
        lock.unlock()
        task.resume()
        if cancelled { Self.cancelAside(task) }
    }

    func cancel() {
        lock.lock()
        isCancelled = true
        let task = self.task
        lock.unlock()
        if let task { Self.cancelAside(task) }
    }

    /// Never on the cancelling thread (see `URLSession.answer(to:)`).
    private static func cancelAside(_ task: URLSessionTask) {
        DispatchQueue.global().async { task.cancel() }
    }
}
