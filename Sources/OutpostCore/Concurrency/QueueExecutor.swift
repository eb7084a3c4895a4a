import Dispatch

/// Runs an actor's jobs one at a time on a dispatch queue of its own.
///
/// An actor that makes blocking calls (SQLite reading and syncing files)
/// would otherwise make them on Swift's shared cooperative threads, one per
/// core: on a two-core phone two such calls stall every other task of the
/// app until they return. Dispatch adds a thread when one of its own
/// blocks, so the rest of the app goes on.
package final class QueueExecutor: SerialExecutor {
    private let queue: DispatchQueue

    package init(label: String) {
        queue = DispatchQueue(label: label, qos: .userInitiated)
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    package func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }
}
