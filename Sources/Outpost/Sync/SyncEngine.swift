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
    /// The local store this engine syncs; the app reads and writes its data through it.
    public let store: LocalStore
    let transport: any SyncTransport
    let options: SyncOptions
    let clock: any MonotonicClock
    let pathMonitor: (any PathMonitor)?
    var random: SeededRandom

    var token: String?
    /// The app's sign-in, asked for tokens (nil when a token is set by hand).
    let credentials: CredentialsProvider?
    var connectivity = ConnectivityModel()
    /// Bumped by every cycle and by a reconnection; answers for an older one are dropped.
    var generation: UInt64 = 0
    var cycleTask: Task<Void, Never>?
    var cycleGeneration: UInt64 = 0
    var followUp: SyncTrigger?
    var startedCycles = 0
    var completedCycles = 0
    var waiters: [(target: Int, id: UInt64, continuation: CheckedContinuation<SyncReport?, Never>)] = []
    var nextWaiterID: UInt64 = 0
    var lastReport: SyncReport?
    /// What the last finished cycle did (the simulation's trace reads it).
    package var lastCycleReport: SyncReport? { lastReport }
    /// While set (monotonic time), automatic triggers wait; manual ones do not.
    var backoffUntil: Duration?
    var transientFailures = 0
    var retryTask: Task<Void, Never>?
    var backgroundTasks: [Task<Void, Never>] = []
    var status = SyncStatus()
    var progress: SyncProgress?
    var scopeTotals: [String: Int64] = [:]
    var statusListeners = Listeners<SyncStatus>()
    var eventListeners = Listeners<SyncEvent>()
    var telemetryListeners = Listeners<SyncTelemetryEvent>()
    var refreshHandlers: [String: @Sendable () async -> Void] = [:]
    var isStopped = false
    /// Bumped when the store is wiped: a status read from the store before
    /// then is not published.
    var statusEpoch = 0

    /// An engine with a token set by hand (``updateToken(_:)`` replaces it).
    ///
    /// - Parameters:
    ///   - store: the local store it syncs.
    ///   - transport: how requests reach the server (``URLSessionTransport`` in an app).
    ///   - token: the bearer token; nil until the person signs in (capture works regardless).
    ///   - options: intervals, batch sizes, timeouts and the app's identity.
    ///   - clock: the monotonic clock its timers use (a manual one in tests).
    ///   - pathMonitor: the OS's network path hints, if any.
    ///   - seed: seeds the jitter, so a test or simulation replays exactly.
    public init(
        store: LocalStore, transport: any SyncTransport, token: String?, options: SyncOptions = SyncOptions(),
        clock: any MonotonicClock = SystemMonotonicClock(), pathMonitor: (any PathMonitor)? = nil,
        seed: UInt64 = UInt64.random(in: 0...UInt64.max)
    ) {
        self.store = store
        self.transport = transport
        self.token = token
        self.credentials = nil
        self.options = options
        self.clock = clock
        self.pathMonitor = pathMonitor
        self.random = SeededRandom(seed: seed)
        self.status.signInRequired = token == nil
    }

    /// An engine that asks the app's sign-in for tokens: once before it
    /// first talks to the server, and again whenever the server refuses the
    /// one it has (see ``CredentialsProvider``).
    public init(
        store: LocalStore, transport: any SyncTransport, options: SyncOptions = SyncOptions(),
        clock: any MonotonicClock = SystemMonotonicClock(), pathMonitor: (any PathMonitor)? = nil,
        seed: UInt64 = UInt64.random(in: 0...UInt64.max), credentials: @escaping CredentialsProvider
    ) {
        self.store = store
        self.transport = transport
        self.token = nil
        self.credentials = credentials
        self.options = options
        self.clock = clock
        self.pathMonitor = pathMonitor
        self.random = SeededRandom(seed: seed)
    }

    // MARK: Lifecycle

    /// Starts the engine: a launch sync, the periodic timer, the path
    /// monitor and local-change listening.
    ///
    /// With a credentials provider and no token (a new engine, or one
    /// signed out), starting asks the provider again.
    public func start() async {
        isStopped = false
        if credentials != nil, token == nil { status.signInRequired = false }
        await publishStatus()
        if let pathMonitor {
            let hints = pathMonitor.hints()
            backgroundTasks.append(Task { [weak self] in
                for await hint in hints { await self?.receive(hint) }
            })
        }
        let changes = await store.localChanges()
        backgroundTasks.append(Task { [weak self] in
            for await _ in changes { await self?.trigger(.localChange) }
        })
        if let interval = options.periodicInterval {
            let clock = self.clock
            backgroundTasks.append(Task { [weak self] in
                while !Task.isCancelled {
                    do { try await clock.sleep(for: interval) } catch { return }
                    await self?.trigger(.periodic)
                }
            })
        }
        trigger(.launch)
    }

    /// Stops every background activity; a cycle in progress is cancelled.
    public func stop() {
        isStopped = true
        backgroundTasks.forEach { $0.cancel() }
        backgroundTasks.removeAll()
        retryTask?.cancel()
        retryTask = nil
        cycleTask?.cancel()
        statusListeners.finishAll()
        eventListeners.finishAll()
        telemetryListeners.finishAll()
    }

    /// A new token after the person signed in again: server calls resume.
    public func updateToken(_ token: String) async {
        self.token = token
        status.signInRequired = false
        if status.lastError == .signInRequired || status.lastError == .accessRevoked { status.lastError = nil }
        await publishStatus()
        trigger(.manual)
    }

    // MARK: Triggers

    /// Asks for a sync. Coalesces with a cycle in progress; automatic
    /// triggers respect a backoff wait, a manual one skips it.
    package func trigger(_ trigger: SyncTrigger) {
        // A stopped engine starts nothing by itself; a sync the app asks
        // for (``sync(timeout:)``) still runs.
        guard !isStopped || trigger == .manual else { return }
        if cycleTask != nil {
            // One follow-up, whatever number of triggers arrive meanwhile.
            if followUp != .manual { followUp = trigger }
            return
        }
        if trigger != .manual, let until = backoffUntil, clock.now() < until {
            return  // The retry timer runs the next cycle.
        }
        if trigger == .manual {
            retryTask?.cancel()
            retryTask = nil
            backoffUntil = nil
        }
        startCycle(trigger)
    }

    /// Returns once no cycle runs and none is about to follow (tests and the
    /// simulation use it to take one step at a time).
    package func waitForIdle() async {
        while let task = cycleTask { await task.value }
    }

    /// Pull-to-refresh: syncs now and returns what the cycle did.
    ///
    /// Throws ``SyncFailure/timedOut`` when no cycle finishes in time (sync
    /// goes on in the background), or the cycle's failure, e.g.
    /// ``SyncFailure/offline``.
    @discardableResult
    public func sync(timeout: Duration = .seconds(60)) async throws -> SyncReport {
        // The cycle this call starts, or the follow-up of the one running.
        let target = startedCycles + 1
        trigger(.manual)
        let report = try await waitForCycle(target, timeout: timeout)
        if let failure = report.failure { throw failure }
        return report
    }

    private func waitForCycle(_ target: Int, timeout: Duration) async throws -> SyncReport {
        if completedCycles >= target, let lastReport { return lastReport }
        let clock = self.clock
        let timer = Task { [weak self] in
            try? await clock.sleep(for: timeout)
            await self?.expireWaiters(target)
        }
        defer { timer.cancel() }
        nextWaiterID += 1
        let id = nextWaiterID
        // A cancelled caller (a dismissed pull-to-refresh) stops waiting at
        // once; the cycle itself goes on in the background.
        let answer: SyncReport? = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                if Task.isCancelled {
                    continuation.resume(returning: nil)
                } else {
                    waiters.append((target, id, continuation))
                }
            }
        } onCancel: {
            Task { await self.cancelWaiter(id) }
        }
        guard let report = answer else { throw CancellationError() }
        if report.failure == .timedOut && completedCycles < target { throw SyncFailure.timedOut }
        return report
    }

    private func cancelWaiter(_ id: UInt64) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        waiters.remove(at: index).continuation.resume(returning: nil)
    }

    private func expireWaiters(_ target: Int) {
        var timedOut = SyncReport(trigger: .manual)
        timedOut.failure = .timedOut
        waiters.removeAll { waiter in
            guard waiter.target == target else { return false }
            waiter.continuation.resume(returning: timedOut)
            return true
        }
    }

    private func startCycle(_ trigger: SyncTrigger) {
        generation += 1
        let generation = self.generation
        cycleGeneration = generation
        startedCycles += 1
        let number = startedCycles
        cycleTask = Task { [weak self] in
            guard let self else { return }
            let report = await self.runCycle(trigger, generation: generation)
            await self.cycleFinished(number, generation: generation, report: report)
        }
    }

    private func cycleFinished(_ number: Int, generation: UInt64, report: SyncReport) async {
        // The status is current before anyone waiting on this cycle resumes.
        await publishStatus()
        if cycleGeneration == generation { cycleTask = nil }
        completedCycles = max(completedCycles, number)
        lastReport = report
        waiters.removeAll { waiter in
            guard waiter.target <= number else { return false }
            waiter.continuation.resume(returning: report)
            return true
        }
        emit(.cycleCompleted(report))
        if !report.conflicts.isEmpty { emit(.conflicts(report.conflicts)) }
        if !report.rejected.isEmpty { emit(.rejected(report.rejected)) }
        if cycleTask == nil, let next = followUp {
            followUp = nil
            trigger(next)
        }
    }

    // MARK: Failures and backoff

    /// Schedules the next attempt after a "not now" failure.
    func scheduleRetry(after failure: SyncFailure) {
        transientFailures += 1
        let delay: Duration
        if case .serverBusy(let retryAfter?) = failure {
            delay = options.retry.delay(retryAfter: retryAfter, random: &random)
        } else {
            delay = options.retry.delay(afterAttempt: transientFailures - 1, random: &random)
        }
        backoffUntil = clock.now() + delay
        retryTask?.cancel()
        let clock = self.clock
        retryTask = Task { [weak self] in
            do { try await clock.sleep(for: delay) } catch { return }
            await self?.retryDue()
        }
    }

    private func retryDue() {
        retryTask = nil
        backoffUntil = nil
        trigger(.retry)
    }

    /// The monotonic time before which automatic syncs wait, if any.
    package var nextRetryAt: Duration? { backoffUntil }

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
        statusListeners.remove(id)
        eventListeners.remove(id)
        telemetryListeners.remove(id)
    }

    /// Registers a feature's refresh, run after each reconnection with its
    /// own random delay within `reconnectJitter`.
    public func registerRefresh(_ name: String, _ handler: @escaping @Sendable () async -> Void) {
        refreshHandlers[name] = handler
    }

    /// Removes the refresh registered under `name`; it no longer runs after reconnections.
    public func unregisterRefresh(_ name: String) {
        refreshHandlers.removeValue(forKey: name)
    }
}

