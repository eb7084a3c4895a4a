import Foundation

/// A wait in a test that ran out of time. Its description names what was
/// awaited, so a hang costs one failing test and a line that says why.
public struct WaitTimedOut: Error, CustomStringConvertible, Sendable {
    public var what: String
    public var timeout: Duration
    public var detail: String?

    public init(_ what: String, timeout: Duration, detail: String? = nil) {
        self.what = what
        self.timeout = timeout
        self.detail = detail
    }

    public var description: String {
        "timed out after \(timeout) waiting until \(what)" + (detail.map { " (\($0))" } ?? "")
    }
}

/// Awaits `operation`, but never longer than `timeout`, and never past the
/// caller's cancellation (a suite's time limit cancels the test).
///
/// The operation runs in a task of its own and the caller waits on a
/// continuation, not on the task: awaiting `Task.value` or an engine's
/// waiter cannot be interrupted, and a task group would wait for its child
/// to finish even after cancelling it, which is exactly the hang this
/// exists to bound. The operation is cancelled when the wait gives up.
public func awaitBounded<T: Sendable>(
    _ what: String, within timeout: Duration = .seconds(30), _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let outcome = OneShotOutcome<T>()
    let work = Task { outcome.finish(await Result(catching: { try await operation() })) }
    let timer = Task {
        try? await Task.sleep(for: timeout)
        if outcome.finish(.failure(WaitTimedOut(what, timeout: timeout))) { work.cancel() }
    }
    defer { timer.cancel() }
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { outcome.install($0) }
    } onCancel: {
        if outcome.finish(.failure(CancellationError())) { work.cancel() }
    }
}

extension Task where Failure == any Error {
    /// The task's value, bounded: a task that never finishes fails the test
    /// with `what` instead of holding the whole run.
    public func value(within timeout: Duration = .seconds(30), _ what: String) async throws -> Success {
        try await awaitBounded(what, within: timeout) { try await self.value }
    }
}

/// The first of several racing outcomes, handed to one waiting continuation.
final class OneShotOutcome<T: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `result` and `continuation` are only touched while `lock` is held.
    private let lock = NSLock()
    private var result: Result<T, any Error>?
    private var continuation: CheckedContinuation<T, any Error>?

    func install(_ waiting: CheckedContinuation<T, any Error>) {
        lock.lock()
        if let result {
            lock.unlock()
            waiting.resume(with: result)
        } else {
            continuation = waiting
            lock.unlock()
        }
    }

    /// Records the outcome if none was recorded yet; true when this one won.
    @discardableResult
    func finish(_ outcome: Result<T, any Error>) -> Bool {
        lock.lock()
        guard result == nil else {
            lock.unlock()
            return false
        }
        result = outcome
        let waiting = continuation
        continuation = nil
        lock.unlock()
        waiting?.resume(with: outcome)
        return true
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
