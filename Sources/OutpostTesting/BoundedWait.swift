import Foundation
import OutpostCore

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
final class OneShotOutcome<T: Sendable>: Sendable {
    /// The outcome once one arrived, and the continuation waiting for it.
    private struct State {
        var result: Result<T, any Error>?
        var continuation: CheckedContinuation<T, any Error>?
    }

    private let state = Locked(State())

    func install(_ waiting: CheckedContinuation<T, any Error>) {
        let result = state.withLock { state -> Result<T, any Error>? in
            if let result = state.result { return result }
            state.continuation = waiting
            return nil
        }
        // Resumed outside the lock, as `finish` does.
        if let result { waiting.resume(with: result) }
    }

    /// Records the outcome if none was recorded yet; true when this one won.
    @discardableResult
    func finish(_ outcome: Result<T, any Error>) -> Bool {
        let (won, waiting) = state.withLock { state -> (Bool, CheckedContinuation<T, any Error>?) in
            guard state.result == nil else { return (false, nil) }
            state.result = outcome
            let waiting = state.continuation
            state.continuation = nil
            return (true, waiting)
        }
        guard won else { return false }
        waiting?.resume(with: outcome)
        return true
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}

/// Waits (in real time, bounded) until a condition holds; throws
/// ``WaitTimedOut`` naming what it waited for. The default bound allows for
/// a full run's start on two cores, when every suite sets up its servers at
/// once and a first sync has waited 30 s for a thread.
public func eventually(
    _ what: String, timeout: Duration = .seconds(60), _ condition: @Sendable () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(5))
    }
    throw WaitTimedOut(what, timeout: timeout)
}
