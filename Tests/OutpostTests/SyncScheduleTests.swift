import Foundation
import OutpostTesting
import Outpost
import Testing

/// The engine's scheduling rules, driven as a value with plain calls: no
/// tasks, no clock, every rule one line.
@Suite("Sync schedule")
struct SyncScheduleTests {
    private func started(_ decision: SyncSchedule.Decision) -> SyncSchedule.Cycle? {
        if case .start(let cycle) = decision { return cycle }
        return nil
    }

    @Test func singleFlightCoalescesIntoOneFollowUpAndManualWins() throws {
        var schedule = SyncSchedule()
        let first = try #require(started(schedule.request(.launch, now: .zero)))
        let localChange = schedule.request(.localChange, now: .zero)
        #expect(localChange == .coalesced)
        let manual = schedule.request(.manual, now: .zero)
        #expect(manual == .coalesced)
        let periodic = schedule.request(.periodic, now: .zero)
        #expect(periodic == .coalesced)
        #expect(schedule.followUp == .manual, "a manual follow-up is never replaced by an automatic one")
        let next = schedule.finished(first)
        #expect(next == .manual)
        let again = schedule.finished(first)
        #expect(again == nil, "one follow-up, once")
        #expect(schedule.completedCycles == 1)
    }

    @Test func backoffHoldsAutomaticTriggersNotManualOnes() throws {
        var schedule = SyncSchedule()
        let first = try #require(started(schedule.request(.launch, now: .zero)))
        let firstAttempt = schedule.failedTransiently()
        #expect(firstAttempt == 0)
        let secondAttempt = schedule.failedTransiently()
        #expect(secondAttempt == 1, "the attempt number grows with failures in a row")
        schedule.backOff(until: .seconds(10))
        _ = schedule.finished(first)
        let during = schedule.request(.localChange, now: .seconds(5))
        #expect(during == .waitingForRetry)
        let pullToRefresh = schedule.request(.manual, now: .seconds(5))
        #expect(started(pullToRefresh) != nil, "pull-to-refresh skips the wait")
        #expect(schedule.backoffUntil == nil)
        var later = SyncSchedule()
        later.backOff(until: .seconds(10))
        let onTime = later.request(.periodic, now: .seconds(10))
        #expect(started(onTime) != nil, "the wait ends on time")
        later.succeeded()
        #expect(later.transientFailures == 0)
    }

    @Test func anAbandonedCycleIsStaleAndItsEndStartsNothing() throws {
        var schedule = SyncSchedule()
        let old = try #require(started(schedule.request(.launch, now: .zero)))
        let abandoned = schedule.abandonRunningCycle()
        #expect(abandoned)
        #expect(!schedule.isCurrent(old.generation), "answers for the abandoned cycle are dropped")
        let fresh = try #require(started(schedule.request(.connectivityRegained, now: .zero)))
        let oldEnd = schedule.finished(old)
        #expect(oldEnd == nil)
        #expect(schedule.running == fresh, "the old cycle ending does not end the new one")
        #expect(schedule.isCurrent(fresh.generation))
        let abandonedAgain = schedule.abandonRunningCycle()
        #expect(abandonedAgain && schedule.running == nil)
    }

    @Test func aStoppedScheduleRunsOnlyWhatTheAppAsksFor() {
        var schedule = SyncSchedule()
        schedule.stop()
        let stoppedPeriodic = schedule.request(.periodic, now: .zero)
        #expect(stoppedPeriodic == .ignored)
        let stoppedLocal = schedule.request(.localChange, now: .zero)
        #expect(stoppedLocal == .ignored)
        let stoppedManual = schedule.request(.manual, now: .zero)
        #expect(started(stoppedManual) != nil)
        schedule.start()
        let restarted = schedule.request(.periodic, now: .zero)
        #expect(restarted == .coalesced)
    }
}

/// Every task the engine starts ends with `stop()`.
@Suite("Engine tasks", .timeLimit(.minutes(1)))
struct EngineTaskTests {
    @Test func stopLeavesNoTaskRunning() async throws {
        let harness = try SyncHarness()
        var options = SyncOptions()
        options.periodicInterval = .seconds(300)
        options.reconnectJitter = .seconds(5)
        let device = try harness.device("u-1", options: options)
        await device.engine.start()
        device.monitor.send(PathHint(isConnected: false, isExpensive: false))
        device.monitor.send(PathHint(isConnected: true, isExpensive: false))
        await device.engine.registerRefresh("inbox") {}
        try await eventually("the engine runs its listeners and timers") { await device.engine.runningTasks >= 2 }
        await device.engine.stop()
        #expect(await device.engine.runningTasks == 0)
        await device.engine.start()
        #expect(await device.engine.runningTasks >= 2, "started again, it listens again")
        // Compared with the moment before, not a fixed number: on a loaded
        // machine the first start's refresh may still be running, and
        // meanwhile tasks only end (the manual clock starts no timer). Its
        // cycle is let end first: ending, it opens the live channel.
        try await eventually("the start's cycle ended") { await !device.engine.activity.cycleRunning }
        let before = await device.engine.runningTasks
        await device.engine.start()
        let once = await device.engine.runningTasks
        await device.engine.stop()
        #expect(await device.engine.runningTasks == 0)
        #expect(once <= before, "a second start adds nothing: \(before) tasks, then \(once)")
    }
}
