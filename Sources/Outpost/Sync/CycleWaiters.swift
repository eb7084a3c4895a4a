/// Callers of ``SyncEngine/sync(timeout:)`` waiting for a cycle to finish,
/// and what the last finished cycle did. Each waiter is told exactly once:
/// the report of the cycle it waits for (or a later one), a timeout, or
/// nil when its caller was cancelled.
package struct CycleWaiters {
    /// Hands a waiter its answer (a continuation's resume, in the engine).
    package typealias Answer = (SyncReport?) -> Void

    private var waiting: [(target: Int, id: UInt64, answer: Answer)] = []
    private var nextID: UInt64 = 0
    /// What the last finished cycle did.
    package private(set) var lastReport: SyncReport?
    /// The last cycles' reports with their numbers, oldest first: a caller
    /// that tries again says what every cycle meanwhile did, the engine's
    /// own retries included.
    private var recent: [(number: Int, report: SyncReport)] = []
    /// How many reports `recent` keeps: more than a sync tried again for an
    /// hour after a busy server runs.
    package static let reportsKept = 64

    package init() {}

    /// How many callers wait.
    package var count: Int { waiting.count }

    /// An id for a caller about to wait, so its cancellation can find it.
    package mutating func reserve() -> UInt64 {
        nextID += 1
        return nextID
    }

    /// Caller `id` waits for the cycle numbered `target` (or a later one).
    package mutating func wait(for target: Int, id: UInt64, answer: @escaping Answer) {
        waiting.append((target, id, answer))
    }

    /// Caller `id` was cancelled: it stops waiting, answered nil.
    package mutating func cancel(_ id: UInt64) {
        guard let index = waiting.firstIndex(where: { $0.id == id }) else { return }
        waiting.remove(at: index).answer(nil)
    }

    /// The time of the callers waiting for `target` ran out: they are
    /// answered with a timed-out report (the cycle goes on).
    package mutating func expire(_ target: Int) {
        var timedOut = SyncReport(trigger: .manual)
        timedOut.failure = .timedOut
        answer(timedOut) { $0 == target }
    }

    /// Cycle `number` finished: every caller waiting for it or an earlier one gets its report.
    package mutating func finished(_ number: Int, report: SyncReport) {
        lastReport = report
        recent.append((number, report))
        if recent.count > Self.reportsKept { recent.removeFirst(recent.count - Self.reportsKept) }
        answer(report) { $0 <= number }
    }

    /// The reports of the cycles numbered after `mark` that finished, oldest first.
    package func reports(after mark: Int) -> [SyncReport] {
        recent.filter { $0.number > mark }.map(\.report)
    }

    /// The store was wiped: the last person's reports are no answer for the next.
    package mutating func forgetLastReport() {
        lastReport = nil
        recent.removeAll()
    }

    private mutating func answer(_ report: SyncReport, waitingFor matches: (Int) -> Bool) {
        waiting.removeAll { waiter in
            guard matches(waiter.target) else { return false }
            waiter.answer(report)
            return true
        }
    }
}
