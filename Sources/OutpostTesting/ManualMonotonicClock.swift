import Foundation
public import Outpost

/// A monotonic clock a test moves by hand: sleepers wake only when the test
/// advances past their deadline, so backoff and jitter are checked exactly.
public final class ManualMonotonicClock: MonotonicClock, @unchecked Sendable {
    // @unchecked Sendable: `current` and `sleepers` are only touched while `lock` is held.
    private let lock = NSLock()
    private var current: Duration = .zero
    private var sleepers: [UUID: (deadline: Duration, continuation: CheckedContinuation<Void, any Error>)] = [:]

    public init() {}

    public func now() -> Duration {
        lock.lock()
        defer { lock.unlock() }
        return current
    }

    /// Deadlines of everyone asleep, soonest first.
    public var pendingDeadlines: [Duration] {
        lock.lock()
        defer { lock.unlock() }
        return sleepers.values.map(\.deadline).sorted()
    }

    public func sleep(for duration: Duration) async throws {
        let id = UUID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                lock.lock()
                if duration <= .zero {
                    lock.unlock()
                    continuation.resume()
                    return
                }
                sleepers[id] = (current + duration, continuation)
                lock.unlock()
            }
        } onCancel: {
            lock.lock()
            let sleeper = sleepers.removeValue(forKey: id)
            lock.unlock()
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Suspends until someone sleeps until exactly `deadline`, so a test
    /// advances past the sleep it means and not past another one that
    /// happened to register first (a request timeout, a `sync` timer).
    /// Fails naming the deadline and what was asleep instead.
    public func waitForSleeper(until deadline: Duration, within timeout: Duration = .seconds(30)) async throws {
        let giveUp = ContinuousClock.now + timeout
        while !pendingDeadlines.contains(deadline) {
            guard ContinuousClock.now < giveUp else {
                throw WaitTimedOut(
                    "a sleeper until \(deadline)", timeout: timeout,
                    detail: "now \(now()), asleep until \(pendingDeadlines)")
            }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Waits until someone sleeps for `duration` from now, then moves time
    /// by exactly that much: the one safe way to release a known sleep.
    public func advanceOnceAsleep(for duration: Duration, within timeout: Duration = .seconds(30)) async throws {
        try await waitForSleeper(until: now() + duration, within: timeout)
        advance(by: duration)
    }

    /// Waits until someone sleeps until exactly `deadline` (a retry timer a
    /// test read from the engine, say), then moves time to it.
    public func advance(toSleeperAt deadline: Duration, within timeout: Duration = .seconds(30)) async throws {
        try await waitForSleeper(until: deadline, within: timeout)
        advance(by: deadline - now())
    }

    /// Moves time forward and wakes every sleeper whose deadline passed.
    public func advance(by duration: Duration) {
        lock.lock()
        current += duration
        let due = sleepers.filter { $0.value.deadline <= current }
        for id in due.keys { sleepers.removeValue(forKey: id) }
        lock.unlock()
        for sleeper in due.values.sorted(by: { $0.deadline < $1.deadline }) { sleeper.continuation.resume() }
    }
}
