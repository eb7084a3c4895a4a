import Foundation

/// Every task a sync engine starts, so ``SyncEngine/stop()`` cancels them
/// all: the cycle, the retry timer, the listeners that live as long as the
/// engine runs, and short ones (a feature's refresh after a reconnection).
struct EngineTasks {
    var cycle: Task<Void, Never>?
    var retry: Task<Void, Never>?
    /// The live channel (a stream or long polls), while one runs.
    var live: Task<Void, Never>?
    private var others: [UInt64: Task<Void, Never>] = [:]
    private var nextID: UInt64 = 0
    /// When the retry timer fires, on the engine's clock.
    var retryDeadline: Duration?
    /// Tracked tasks that sleep before they act, and until when.
    private(set) var timers: [UInt64: Duration] = [:]

    /// An id for a task about to be started, so it can say when it ends.
    mutating func reserve() -> UInt64 {
        nextID += 1
        return nextID
    }

    mutating func track(_ id: UInt64, _ task: Task<Void, Never>, sleepingUntil deadline: Duration? = nil) {
        others[id] = task
        timers[id] = deadline
    }

    /// A tracked task's sleep is over.
    mutating func woke(_ id: UInt64) { timers[id] = nil }

    /// A tracked task ended on its own.
    mutating func ended(_ id: UInt64) {
        others[id] = nil
        timers[id] = nil
    }

    mutating func cancelRetry() {
        retry?.cancel()
        retry = nil
        retryDeadline = nil
    }

    mutating func cancelLive() {
        live?.cancel()
        live = nil
    }

    mutating func cancelAll() {
        cycle?.cancel()
        cycle = nil
        cancelLive()
        cancelRetry()
        others.values.forEach { $0.cancel() }
        others.removeAll()
        timers.removeAll()
    }

    /// How many tasks are running (tests check that stop leaves none).
    var count: Int { (cycle == nil ? 0 : 1) + (retry == nil ? 0 : 1) + (live == nil ? 0 : 1) + others.count }
}
