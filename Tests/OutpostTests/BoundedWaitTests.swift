import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// The waits tests are built from: each one either cannot race or fails
/// with what it waited for, and none outlives its bound.
@Suite("Bounded waits", .timeLimit(.minutes(2)))
struct BoundedWaitTests {
    /// The hang that held a whole run: a test waited for "some sleeper", saw
    /// the sync's own 60 s timer instead of the 4 s delay it meant, advanced
    /// 4 s and released nothing. Here the unrelated sleeper registers first
    /// on purpose; the test must still release exactly the delay.
    @Test func aDelayIsReleasedEvenWhenAnotherSleeperRegisteredFirst() async throws {
        let harness = try SyncHarness()
        var options = SyncOptions()
        options.periodicInterval = nil
        options.requestTimeout = 10
        let device = try harness.device("u-1", options: options)
        try await device.store.create(Person(name: "Ana"))
        let decoy = Task { try await harness.clock.sleep(for: .seconds(60)) }
        defer { decoy.cancel() }
        try await harness.clock.waitForSleeper(until: .seconds(60))
        // The racy check this replaces was already satisfied here.
        #expect(harness.clock.pendingDeadlines.count >= 1)

        device.network.inject(.delay(.seconds(4)))
        let sync = Task { try await device.engine.sync() }
        try await harness.clock.advanceOnceAsleep(for: .seconds(4))
        let report = try await sync.value(within: .seconds(30), "the delayed sync finished")
        #expect(report.confirmed == 1)
    }

    @Test func waitingForASleeperThatNeverComesFailsNamingWhatWasAsleep() async throws {
        let clock = ManualMonotonicClock()
        let other = Task { try await clock.sleep(for: .seconds(60)) }
        defer { other.cancel() }
        try await clock.waitForSleeper(until: .seconds(60))
        let error = await #expect(throws: WaitTimedOut.self) {
            try await clock.waitForSleeper(until: .seconds(4), within: .milliseconds(100))
        }
        #expect(error?.description.contains("asleep until [60.0 seconds]") == true, "\(String(describing: error))")
        #expect(clock.now() == .zero, "a failed wait moves no time")
    }

    @Test func aTaskThatNeverFinishesFailsItsWaitInsteadOfHanging() async throws {
        let never = Task<Void, any Error> {
            await withCheckedContinuation { (_: CheckedContinuation<Void, Never>) in }
        }
        let started = ContinuousClock.now
        let error = await #expect(throws: WaitTimedOut.self) {
            try await never.value(within: .milliseconds(200), "a task that never ends finished")
        }
        // A 200 ms bound; at a full run's start, with every suite setting up at
        // once on two cores, its wake-up has come 30.8 s late. Hung is never.
        #expect(ContinuousClock.now - started < .seconds(90), "bounded, not hung")
        #expect(error?.description.contains("a task that never ends finished") == true)
    }

    @Test func aBoundedWaitEndsWhenItsCallerIsCancelled() async throws {
        let waiting = Task {
            try await awaitBounded("forever", within: .seconds(3600)) {
                await withCheckedContinuation { (_: CheckedContinuation<Void, Never>) in }
            }
        }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
    }

    @Test func aGateNobodyReachesFailsItsWait() async throws {
        let gate = FaultInjectingTransport.Gate()
        await #expect(throws: WaitTimedOut.self) { try await gate.waitForArrivals(within: .milliseconds(100)) }
    }

    /// A cancelled pull-to-refresh stops waiting at once, while the cycle
    /// it started goes on: a suite's time limit can end such a test.
    @Test func aCancelledSyncCallStopsWaitingAndTheCycleGoesOn() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        try await device.store.create(Person(name: "Ana"))
        let gate = FaultInjectingTransport.Gate()
        device.network.inject(.hold(gate)) { $0.target.hasPrefix("/v1/push") }
        let caller = Task { try await device.engine.sync() }
        try await gate.waitForArrivals()
        caller.cancel()
        await #expect(throws: CancellationError.self) {
            try await caller.value(within: .seconds(30), "the cancelled sync call returned")
        }
        gate.open()
        try await eventually("the cycle finished in the background") { try harness.serverRecords().count == 1 }
        await device.engine.waitForIdle()
        #expect(try await device.store.outboxEntries().isEmpty)
    }
}
