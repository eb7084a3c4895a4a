public import Foundation

extension SyncEngine {
    /// Syncs in the time the system gives a backgrounded app, most valuable
    /// work first, and says what is left.
    ///
    /// One cycle runs: changes are pushed, then attachments are uploaded
    /// smallest first (then the changes they released are pushed), then
    /// the pull. A follow-up the cycle asks for (uploads left after
    /// ``SyncOptions/attachmentUploadTime``) runs within the same deadline.
    /// A cycle already running is joined: this sync follows it and neither
    /// waits longer than the deadline.
    ///
    /// At the deadline the cycle is cut cleanly: requests in flight are
    /// cancelled, every page stored so far stays stored whole, and a push
    /// whose answer did not come stays "checking result" until the next
    /// sync resends it (the server applies it once). Nothing more starts
    /// until the next trigger. Cancelling the calling task (a background
    /// task's expiration handler) cuts the same way, at once.
    ///
    /// Call ``enteredBackground()`` when the app leaves the screen: this
    /// works with the live channel open or closed, but in the background
    /// the channel only costs battery.
    ///
    /// - Parameter deadline: when the work must have stopped: the system's
    ///   limit minus a margin for the app's own clean-up.
    /// - Returns: what was done and what is left (``BackgroundSyncReport/isComplete``).
    /// - Throws: ``BackgroundSyncError/deadlinePassed(by:)`` when the
    ///   deadline is not in the future; nothing is done then.
    @discardableResult
    public func syncInBackground(until deadline: Date) async throws -> BackgroundSyncReport {
        // The device's wall clock, read once: from here on the monotonic one decides.
        let left = deadline.timeIntervalSince(store.clock.now())
        return try await syncInBackground(within: .milliseconds(Int64((left * 1000).rounded(.down))))
    }

    /// Syncs in the background until `deadline` on the system's continuous
    /// clock (which keeps counting while the device sleeps); see
    /// ``syncInBackground(until:)-(Date)``.
    @discardableResult
    public func syncInBackground(until deadline: ContinuousClock.Instant) async throws -> BackgroundSyncReport {
        try await syncInBackground(within: ContinuousClock.now.duration(to: deadline))
    }

    /// Syncs in the background for `budget` on the engine's own clock (a
    /// manual one in tests).
    package func syncInBackground(within budget: Duration) async throws -> BackgroundSyncReport {
        guard budget > .zero else { throw BackgroundSyncError.deadlinePassed(by: .zero - budget) }
        let deadline = clock.now() + budget
        var result = BackgroundSyncReport()
        // This call's cycle, or the follow-up of one running: the same single flight as `sync`.
        var target = schedule.startedCycles + 1
        trigger(.manual)
        while true {
            let left = deadline - clock.now()
            do {
                guard left > .zero else { throw SyncFailure.timedOut }
                var report = try await waitForCycle(target, timeout: left)
                // Timed out as the cycle finished: the answer is the cycle's own report.
                if report.failure == .timedOut, let last = waiters.lastReport { report = last }
                result.add(report)
                result.failure = report.failure
                if report.failure == nil { result.pullFinished = true }
            } catch {
                // The deadline, or the caller cancelled (a task's expiration).
                result.deadlineReached = true
                // What a cycle before this call's own did is not this call's.
                if let (cycle, report) = await cutRunningCycle(), cycle.number >= target { result.add(report) }
                break
            }
            // A follow-up it asked for: uploads left, changes the pull freed.
            guard result.failure == nil, let next = schedule.running else { break }
            target = next.number
        }
        await publishStatus()
        result.left(outbox: try await store.outboxSummary(), attachments: try await store.attachmentSummary())
        return result
    }

    /// Cuts the running cycle and waits for it to end: its requests are
    /// cancelled, and what it already stored or settled stays. Returns what
    /// it did before the cut, if a cycle ran.
    private func cutRunningCycle() async -> (SyncSchedule.Cycle, SyncReport)? {
        guard let task = tasks.cycle, let cycle = schedule.cut() else { return nil }
        task.cancel()
        // Store writes finish whole; transports end cancelled requests at once.
        await task.value
        guard schedule.completedCycles >= cycle.number, let report = waiters.lastReport else { return nil }
        return (cycle, report)
    }
}
