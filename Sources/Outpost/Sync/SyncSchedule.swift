import Foundation

/// When sync cycles run, as a value: the engine asks it what a trigger
/// does, and tells it what happened. No tasks, no clock of its own, so a
/// test drives every rule with plain calls.
///
/// The rules:
/// - Single flight: at most one cycle runs; triggers meanwhile coalesce
///   into one follow-up (a manual one wins over any other).
/// - Every cycle has a generation; abandoning a cycle (a reconnection)
///   bumps it, and an answer for an older generation is dropped.
/// - After a "not now" failure, automatic triggers wait until the backoff
///   ends; a manual one skips the wait (never the single flight).
/// - A stopped engine starts nothing by itself; a manual sync still runs.
package struct SyncSchedule: Sendable, Equatable {
    /// A cycle the schedule started.
    package struct Cycle: Sendable, Equatable {
        /// 1 for the first cycle this engine ran, then counting up.
        package let number: Int
        package let generation: UInt64
        package let trigger: SyncTrigger
    }

    /// What a trigger does.
    package enum Decision: Sendable, Equatable {
        /// Run this cycle now.
        case start(Cycle)
        /// A cycle runs: this trigger becomes (or joins) its follow-up.
        case coalesced
        /// An automatic trigger during a backoff: the retry timer runs the next cycle.
        case waitingForRetry
        /// The engine is stopped and the trigger was automatic.
        case ignored
    }

    package private(set) var generation: UInt64 = 0
    package private(set) var running: Cycle?
    package private(set) var followUp: SyncTrigger?
    package private(set) var startedCycles = 0
    package private(set) var completedCycles = 0
    /// While set (monotonic time), automatic triggers wait.
    package private(set) var backoffUntil: Duration?
    /// "Not now" failures in a row: the backoff grows with them.
    package private(set) var transientFailures = 0
    package private(set) var isStopped = false
    /// A cycle cut at a background deadline: what it asks for next waits
    /// for the next trigger instead of starting as the app is suspended.
    private var cutGeneration: UInt64?

    package init() {}

    package mutating func start() { isStopped = false }
    package mutating func stop() { isStopped = true }

    /// What `trigger` does at monotonic time `now`.
    package mutating func request(_ trigger: SyncTrigger, now: Duration) -> Decision {
        if isStopped && trigger != .manual { return .ignored }
        if running != nil {
            if followUp != .manual { followUp = trigger }
            return .coalesced
        }
        if trigger != .manual, let until = backoffUntil, now < until { return .waitingForRetry }
        if trigger == .manual { backoffUntil = nil }
        generation += 1
        startedCycles += 1
        let cycle = Cycle(number: startedCycles, generation: generation, trigger: trigger)
        running = cycle
        return .start(cycle)
    }

    /// Whether answers for `generation` still count.
    package func isCurrent(_ generation: UInt64) -> Bool { generation == self.generation }

    /// A cycle ended; returns the follow-up to request now, if any.
    package mutating func finished(_ cycle: Cycle) -> SyncTrigger? {
        if running?.generation == cycle.generation { running = nil }
        completedCycles = max(completedCycles, cycle.number)
        if cycle.generation == cutGeneration {
            cutGeneration = nil
            if running == nil { followUp = nil }
            return nil
        }
        guard running == nil, let next = followUp else { return nil }
        followUp = nil
        return next
    }

    /// Runs another cycle after the current one (a token replaced while it ran).
    package mutating func requestFollowUp(_ trigger: SyncTrigger) { followUp = trigger }

    /// Drops the running cycle: its answers will be ignored. Returns whether one ran.
    package mutating func abandonRunningCycle() -> Bool {
        guard running != nil else { return false }
        generation += 1
        running = nil
        return true
    }

    /// Cuts the running cycle at a deadline: abandoned like a replaced one,
    /// and neither a follow-up asked for so far nor one it asks for before
    /// it ends starts. Returns the cycle cut, if one ran.
    package mutating func cut() -> Cycle? {
        guard let cycle = running else { return nil }
        followUp = nil
        cutGeneration = cycle.generation
        _ = abandonRunningCycle()
        return cycle
    }

    /// A cycle got through: no backoff.
    package mutating func succeeded() {
        transientFailures = 0
        backoffUntil = nil
    }

    /// A "not now" failure; returns how many came before it in a row (the
    /// attempt number the retry delay grows with).
    package mutating func failedTransiently() -> Int {
        transientFailures += 1
        return transientFailures - 1
    }

    /// Automatic triggers wait until `until`.
    package mutating func backOff(until: Duration) { backoffUntil = until }

    /// The retry timer fired, or the network came back: the wait is over.
    package mutating func backoffEnded(resetFailures: Bool) {
        backoffUntil = nil
        if resetFailures { transientFailures = 0 }
    }
}
