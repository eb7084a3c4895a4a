import Foundation
public import Outpost
import OutpostCore

/// A monotonic clock a test moves by hand: sleepers wake only when the test
/// advances past their deadline, so backoff and jitter are checked exactly.
public final class ManualMonotonicClock: MonotonicClock, Sendable {
    /// The time now, and everyone asleep with the continuation that wakes them.
    private struct State {
        var current: Duration = .zero
        var sleepers: [UUID: (deadline: Duration, continuation: CheckedContinuation<Void, any Error>)] = [:]
        /// Sleeps cancelled before they were registered (the cancellation
        /// handler can run first): they end as soon as they register.
        var cancelled: Set<UUID> = []
    }

    private let state = Locked(State())

    public init() {}

    public func now() -> Duration {
        state.withLock { $0.current }
    }

    /// Deadlines of everyone asleep, soonest first.
    public var pendingDeadlines: [Duration] {
        state.withLock { $0.sleepers.values.map(\.deadline).sorted() }
    }

    public func sleep(for duration: Duration) async throws {
        let id = UUID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case asleep, done, cancelled }
                let outcome = state.withLock { state -> Outcome in
                    if state.cancelled.remove(id) != nil { return .cancelled }
                    if duration <= .zero { return .done }
                    state.sleepers[id] = (state.current + duration, continuation)
                    return .asleep
                }
                // A sleep of no time returns at once, resumed outside the lock.
                switch outcome {
                case .asleep: break
                case .done: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let sleeper = state.withLock { state in
                let sleeper = state.sleepers.removeValue(forKey: id)
                if sleeper == nil { state.cancelled.insert(id) }
                return sleeper
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Suspends until someone sleeps until exactly `deadline`, so a test
    /// advances past the sleep it means and not past another one that
    /// happened to register first (a request timeout, a `sync` timer).
    /// Fails naming the deadline and what was asleep instead.
    /// The default bound is `eventually`'s: a full run's start on two cores has kept a sleeper from arriving for 30 s.
    public func waitForSleeper(until deadline: Duration, within timeout: Duration = .seconds(60)) async throws {
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
    public func advanceOnceAsleep(for duration: Duration, within timeout: Duration = .seconds(60)) async throws {
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
        let due = state.withLock { state in
            state.current += duration
            let now = state.current
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { state.sleepers.removeValue(forKey: id) }
            return due
        }
        // Woken outside the lock, so a woken sleeper may call back in at once.
        for sleeper in due.values.sorted(by: { $0.deadline < $1.deadline }) { sleeper.continuation.resume() }
    }
}
