import Foundation
import OutpostCore

/// The one sync coordinator of an account.
///
/// Open the ``LocalStore`` first (it works offline from the first line),
/// then connect:
///
/// ```swift
/// let engine = SyncEngine(store: store, transport: URLSessionTransport(baseURL: server), token: token)
/// await engine.start()                         // launch trigger, periodic sync, path monitor
/// try await engine.sync(timeout: .seconds(30)) // pull-to-refresh
/// for await status in await engine.statusUpdates() { show(StatusMessage.text(for: status)) }
/// ```
///
/// Single flight: at most one cycle runs; triggers during a cycle coalesce
/// into one follow-up. Each cycle has a generation; an answer that arrives
/// for an older generation is ignored. Waits between retries use a
/// monotonic clock; a manual sync skips them, never the in-flight exclusion.
public actor SyncEngine {
    // A coordinator of parts, each a value that owns its state and changes
    // it only through its own events: SyncSchedule (when cycles run),
    // PushPipeline, AttachmentUploads, LiveChannel, StatusPublisher (the only
    // writer of the status), Credentials and CycleWaiters. The actor holds
    // one of each, performs their I/O, and keeps the decisions that span
    // them (whether the channel should run, what a cycle's failure means).

    /// The local store this engine syncs; the app reads and writes its data through it.
    public let store: LocalStore
    let transport: any SyncTransport
    /// Whether the server reads deflated pushes, learnt from its answers.
    let requestEncodings = RequestEncodings()
    let options: SyncOptions
    let clock: any MonotonicClock
    let pathMonitor: (any PathMonitor)?
    var random: SeededRandom

    /// The token, and the app's sign-in that gives new ones.
    var credentials: Credentials
    var connectivity = ConnectivityModel()
    /// When cycles run: single flight, follow-ups, generations, backoff.
    var schedule = SyncSchedule()
    /// Every task the engine started; ``stop()`` cancels them all.
    var tasks = EngineTasks()
    /// Between ``start()`` and ``stop()``: the listeners and timers run.
    var isStarted = false
    /// Until ``enteredBackground()``; ``enteredForeground()`` sets it again.
    var isInForeground = true
    /// The live channel: which one is current, how it reaches the server, the feed's position.
    var liveChannel = LiveChannel()
    /// Set by ``stop()``: an engine kept live without ``start()`` stays closed.
    var wasStopped = false
    /// When the last cycle started (monotonic): the periodic sync is rarer while live.
    var lastCycleStartedAt: Duration?
    /// Callers of ``sync(timeout:)`` waiting for a cycle, and the last cycle's report.
    var waiters = CycleWaiters()
    /// What the last finished cycle did (the simulation's trace reads it).
    package var lastCycleReport: SyncReport? { waiters.lastReport }

    /// How many cycles have ended: the mark ``reportOfCycles(after:)`` counts from.
    package var endedCycles: Int { schedule.completedCycles }

    /// What the cycles that ended after `mark` did, as one report: the
    /// newest one's, with what each earlier one settled counted in
    /// (``SyncReport/include(_:)``); nil when none ended. A caller that
    /// tried again after a busy server may find its change sent by the
    /// engine's own retry in between, and its last cycle with nothing to send.
    package func reportOfCycles(after mark: Int) -> SyncReport? {
        let ended = waiters.reports(after: mark)
        guard var whole = ended.last else { return nil }
        // Newest first, so the conflicts and refusals each prepends end in the order they came.
        for earlier in ended.dropLast().reversed() { whole.include(earlier) }
        return whole
    }
    /// The only writer of the status; every other part sends it events.
    var statusPublisher: StatusPublisher
    /// Records in scope per collection, as the server last counted them (the status's coverage).
    var scopeTotals: [String: Int64] = [:]
    /// The outbox as the next requests report it (`Outpost-Outbox`), read
    /// before a cycle's push and again before its pull.
    var outboxReport = OutboxReport(unsent: 0, oldestSeconds: nil)
    var eventListeners = Listeners<SyncEvent>()
    var telemetryListeners = Listeners<SyncTelemetryEvent>()
    var refreshHandlers: [String: @Sendable () async -> Void] = [:]
    /// Piece sizes and bytes sent of attachment uploads.
    var attachmentUploads = AttachmentUploads()

    /// An engine with a token set by hand (``updateToken(_:)`` replaces it).
    ///
    /// - Parameters:
    ///   - store: the local store it syncs.
    ///   - transport: how requests reach the server (``URLSessionTransport`` in an app).
    ///   - token: the bearer token; nil until the person signs in (capture works regardless).
    ///   - options: intervals, batch sizes, timeouts and the app's identity.
    ///   - clock: the monotonic clock its timers use (a manual one in tests).
    ///   - pathMonitor: the network path hints; by default the OS's own where it has a
    ///     monitor (`SystemPathMonitor`), none elsewhere (send hints with ``receive(_:)``).
    ///   - seed: seeds the jitter, so a test or simulation replays exactly.
    public init(
        store: LocalStore, transport: any SyncTransport, token: String?, options: SyncOptions = SyncOptions(),
        clock: any MonotonicClock = SystemMonotonicClock(), pathMonitor: (any PathMonitor)? = SyncEngine.osPathMonitor(),
        seed: UInt64 = UInt64.random(in: 0...UInt64.max)
    ) {
        self.store = store
        self.transport = transport
        self.credentials = Credentials(token: token)
        self.statusPublisher = StatusPublisher(signInRequired: token == nil)
        self.options = options
        self.clock = clock
        self.pathMonitor = pathMonitor
        self.random = SeededRandom(seed: seed)
        connectBlobSource()
    }

    /// An engine that asks the app's sign-in for tokens: once before it
    /// first talks to the server, and again whenever the server refuses the
    /// one it has (see ``CredentialsProvider``).
    public init(
        store: LocalStore, transport: any SyncTransport, options: SyncOptions = SyncOptions(),
        clock: any MonotonicClock = SystemMonotonicClock(), pathMonitor: (any PathMonitor)? = SyncEngine.osPathMonitor(),
        seed: UInt64 = UInt64.random(in: 0...UInt64.max), credentials: @escaping CredentialsProvider
    ) {
        self.store = store
        self.transport = transport
        self.credentials = Credentials(token: nil, provider: credentials)
        self.statusPublisher = StatusPublisher()
        self.options = options
        self.clock = clock
        self.pathMonitor = pathMonitor
        self.random = SeededRandom(seed: seed)
        connectBlobSource()
    }

    // MARK: Lifecycle

    /// Starts the engine: a launch sync, the periodic timer, the path
    /// monitor and local-change listening.
    ///
    /// With a credentials provider and no token (a new engine, or one
    /// signed out), starting asks the provider again.
    public func start() async {
        guard !isStarted else { return }
        isStarted = true
        schedule.start()
        if credentials.hasProvider, token == nil { statusPublisher.send(.signInRequired(false)) }
        await publishStatus()
        if let pathMonitor {
            let hints = pathMonitor.hints()
            spawn { engine in
                for await hint in hints { await engine.receive(hint) }
            }
        }
        let changes = await store.localChanges()
        spawn { engine in
            for await _ in changes { await engine.trigger(.localChange) }
        }
        if let interval = options.periodicInterval {
            let clock = self.clock
            spawn { engine in
                while !Task.isCancelled {
                    do { try await clock.sleep(for: interval) } catch { return }
                    await engine.trigger(.periodic)
                }
            }
        }
        trigger(.launch)
    }

    /// Stops every background activity: a cycle in progress, the retry
    /// timer, listeners and refreshes are all cancelled.
    public func stop() {
        isStarted = false
        wasStopped = true
        schedule.stop()
        // A cycle that was running is abandoned: its answers are dropped.
        _ = schedule.abandonRunningCycle()
        liveChannel.abandon()
        tasks.cancelAll()
        statusPublisher.send(.stopped)
        statusPublisher.finishListeners()
        eventListeners.finishAll()
        telemetryListeners.finishAll()
    }

    /// A new token after the person signed in again: server calls resume.
    public func updateToken(_ token: String) async {
        credentials.replace(with: token)
        statusPublisher.send(.tokenReplaced)
        await publishStatus()
        trigger(.manual)
    }

    // MARK: Triggers

    /// Asks for a sync. Coalesces with a cycle in progress; automatic
    /// triggers respect a backoff wait, a manual one skips it.
    package func trigger(_ trigger: SyncTrigger) {
        let now = clock.now()
        // While the live channel brings every change, the periodic sync is
        // only the safety net.
        if trigger == .periodic, status.live == .live, let last = lastCycleStartedAt,
            now - last < options.periodicIntervalWhileLive
        {
            return
        }
        // A stopped engine starts nothing by itself; a sync the app asks
        // for (``sync(timeout:)``) still runs.
        guard case .start(let cycle) = schedule.request(trigger, now: now) else { return }
        if trigger == .manual { tasks.cancelRetry() }
        lastCycleStartedAt = now
        // With the channel live, sending local changes needs no pull: the
        // channel brings what others wrote. Any other cycle takes a fresh
        // snapshot, so the channel is closed first and reopened after it,
        // from the new cursor.
        let pulls = !(status.live == .live && tasks.live != nil && (trigger == .localChange || trigger == .retry))
        if pulls {
            // The channel closes for the cycle's snapshot and reopens after
            // it: the status says "connecting" meanwhile, not "off" and back.
            stopLive(showing: tasks.live != nil ? .connecting : .off)
        }
        tasks.cycle = Task { [weak self] in
            guard let self else { return }
            let report = await self.runCycle(trigger, generation: cycle.generation, pulls: pulls)
            await self.cycleFinished(cycle, report: report)
        }
    }

    /// Starts a task the engine tracks (and ``stop()`` cancels); it holds
    /// the engine weakly and forgets itself when done.
    func spawn(after delay: Duration? = nil, _ body: @escaping @Sendable (SyncEngine) async -> Void) {
        let id = tasks.reserve()
        let clock = self.clock
        let task = Task { [weak self] in
            if let delay {
                do { try await clock.sleep(for: delay) } catch { return }
                await self?.taskWoke(id)
            }
            guard let engine = self else { return }
            await body(engine)
            await engine.taskEnded(id)
        }
        tasks.track(id, task, sleepingUntil: delay.map { clock.now() + $0 })
    }

    private func taskWoke(_ id: UInt64) { tasks.woke(id) }

    private func taskEnded(_ id: UInt64) { tasks.ended(id) }

    /// Tasks running now (tests check that ``stop()`` leaves none).
    package var runningTasks: Int { tasks.count }

    /// Where the engine's background work stands, for a caller that drives
    /// it one step at a time (the simulation) and must wait until every
    /// task is blocked on something it controls.
    package struct ActivityProbe: Sendable, Equatable {
        /// A sync cycle is running.
        package var cycleRunning: Bool
        /// A live channel is open (its loop may be between reads).
        package var channelOpen: Bool
        /// Live loops still running, replaced ones included.
        package var liveLoops: Int
        /// The open channel's loop sleeps until then.
        package var sleepingUntil: Duration?
        /// The open stream's watchdog sleeps until then.
        package var watchdogUntil: Duration?
        /// Timers that will fire (the retry, delayed tasks): each must be
        /// asleep on the clock until its deadline, not about to act.
        package var timers: [Duration]
    }

    package var activity: ActivityProbe {
        ActivityProbe(
            cycleRunning: tasks.cycle != nil, channelOpen: tasks.live != nil, liveLoops: liveChannel.loopsRunning,
            sleepingUntil: liveChannel.sleepingUntil, watchdogUntil: liveChannel.watchdogUntil,
            timers: Array(tasks.timers.values) + (tasks.retryDeadline.map { [$0] } ?? []))
    }

    /// Returns once no cycle runs and none is about to follow (tests and the
    /// simulation use it to take one step at a time).
    package func waitForIdle() async {
        while let task = tasks.cycle { await task.value }
    }

    /// Pull-to-refresh: syncs now and returns what the cycle did.
    ///
    /// Throws ``SyncFailure/timedOut`` when no cycle finishes in time (sync
    /// goes on in the background), or the cycle's failure, e.g.
    /// ``SyncFailure/offline``.
    @discardableResult
    public func sync(timeout: Duration = .seconds(60)) async throws -> SyncReport {
        // The cycle this call starts, or the follow-up of the one running.
        let target = schedule.startedCycles + 1
        trigger(.manual)
        let report = try await waitForCycle(target, timeout: timeout)
        if let failure = report.failure { throw failure }
        return report
    }

    func waitForCycle(_ target: Int, timeout: Duration) async throws -> SyncReport {
        if schedule.completedCycles >= target, let lastReport = waiters.lastReport { return lastReport }
        let clock = self.clock
        let timer = Task { [weak self] in
            try? await clock.sleep(for: timeout)
            await self?.expireWaiters(target)
        }
        defer { timer.cancel() }
        let id = waiters.reserve()
        // A cancelled caller (a dismissed pull-to-refresh) stops waiting at
        // once; the cycle itself goes on in the background.
        let answer: SyncReport? = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                if Task.isCancelled {
                    continuation.resume(returning: nil)
                } else {
                    waiters.wait(for: target, id: id) { continuation.resume(returning: $0) }
                }
            }
        } onCancel: {
            Task { await self.cancelWaiter(id) }
        }
        guard let report = answer else { throw CancellationError() }
        if report.failure == .timedOut && schedule.completedCycles < target { throw SyncFailure.timedOut }
        return report
    }

    private func cancelWaiter(_ id: UInt64) { waiters.cancel(id) }

    private func expireWaiters(_ target: Int) { waiters.expire(target) }

    private func cycleFinished(_ cycle: SyncSchedule.Cycle, report: SyncReport) async {
        // The status is current before anyone waiting on this cycle resumes.
        await publishStatus()
        let next = schedule.finished(cycle)
        if schedule.running == nil { tasks.cycle = nil }
        waiters.finished(cycle.number, report: report)
        emit(.cycleCompleted(report))
        if !report.conflicts.isEmpty { emit(.conflicts(report.conflicts)) }
        if !report.rejected.isEmpty { emit(.rejected(report.rejected)) }
        if let next {
            trigger(next)
        } else if report.failure == nil {
            ensureLive()
        }
        // A cycle that failed leaves the channel closed until a later one succeeds.
        if tasks.live == nil, tasks.cycle == nil, status.live != .off { setLive(.off) }
    }

    // MARK: Failures and backoff

    /// Schedules the next attempt after a "not now" failure.
    func scheduleRetry(after failure: SyncFailure) {
        let attempt = schedule.failedTransiently()
        let delay: Duration
        if case .serverBusy(let retryAfter?) = failure {
            delay = options.retry.delay(retryAfter: retryAfter, random: &random)
        } else {
            delay = options.retry.delay(afterAttempt: attempt, random: &random)
        }
        startRetryTimer(after: delay, resetFailures: false, trigger: .retry)
    }

    /// Automatic triggers wait `delay`; then `trigger` runs.
    func startRetryTimer(after delay: Duration, resetFailures: Bool, trigger: SyncTrigger) {
        schedule.backOff(until: clock.now() + delay)
        tasks.cancelRetry()
        let clock = self.clock
        tasks.retryDeadline = clock.now() + delay
        tasks.retry = Task { [weak self] in
            do { try await clock.sleep(for: delay) } catch { return }
            await self?.retryDue(resetFailures: resetFailures, trigger: trigger)
        }
    }

    private func retryDue(resetFailures: Bool, trigger: SyncTrigger) {
        tasks.retry = nil
        tasks.retryDeadline = nil
        schedule.backoffEnded(resetFailures: resetFailures)
        self.trigger(trigger)
    }

    /// The monotonic time before which automatic syncs wait, if any.
    package var nextRetryAt: Duration? { schedule.backoffUntil }

    // MARK: Events

    /// Events one at a time: fresh session needed, sign-in required, conflicts, refusals.
    public func events() -> AsyncStream<SyncEvent> {
        eventListeners.add(newest: 64, ended: listenerEnded).stream
    }

    func emit(_ event: SyncEvent) { eventListeners.yield(event) }

    /// One event per finished sync cycle, for the app's telemetry: coarse
    /// network state, trigger, outcome and counts (see `SyncTelemetryEvent`).
    public func telemetry() -> AsyncStream<SyncTelemetryEvent> {
        telemetryListeners.add(newest: 256, ended: listenerEnded).stream
    }

    func emitTelemetry(_ event: SyncTelemetryEvent) { telemetryListeners.yield(event) }

    /// Called from a stream's termination; ids are unique across the kinds.
    nonisolated var listenerEnded: @Sendable (UUID) -> Void {
        { [weak self] id in Task { await self?.removeListener(id) } }
    }

    private func removeListener(_ id: UUID) {
        statusPublisher.unsubscribe(id)
        eventListeners.remove(id)
        telemetryListeners.remove(id)
    }

    /// Registers a feature's refresh, run after each reconnection with its
    /// own random delay within `reconnectJitter`.
    public func registerRefresh(_ name: String, _ handler: @escaping @Sendable () async -> Void) {
        refreshHandlers[name] = handler
    }
}

