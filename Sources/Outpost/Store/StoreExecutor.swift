import Dispatch

/// Where a store's work runs: a serial dispatch queue of its own.
///
/// SQLite blocks its caller (statements, fsyncs, checkpoints, attachment
/// copies); on Swift's cooperative threads, one a core, two such calls on
/// a two-core watch stall every other task of the app. Dispatch lends the
/// queue a thread of its own and adds one when it blocks.
///
/// A call into the store costs one hop onto the queue and one back (two
/// thread wake-ups), where a default actor runs an uncontended call on the
/// caller's thread: each call does all of its work in that one hop, and
/// ``LocalStore/write(_:)`` batches many changes into one call.
#if canImport(Darwin)
package final class StoreExecutor: Sendable {
    /// Apple's queue is itself a serial executor, with the runtime's fast path.
    let queue: DispatchSerialQueue

    package init(label: String = "outpost.store") {
        queue = DispatchSerialQueue(label: label, qos: .userInitiated)
        queue.setSpecific(key: Self.key, value: Marker(self))
    }

    package var unownedExecutor: UnownedSerialExecutor { queue.asUnownedSerialExecutor() }
}
#else
package final class StoreExecutor: SerialExecutor {
    let queue: DispatchQueue

    package init(label: String = "outpost.store") {
        queue = DispatchQueue(label: label, qos: .userInitiated)
        queue.setSpecific(key: Self.key, value: Marker(self))
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    package func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }

    /// Lets `assumeIsolated` run store code from a block already on the queue.
    package func checkIsolated() { dispatchPrecondition(condition: .onQueue(queue)) }

    package var unownedExecutor: UnownedSerialExecutor { asUnownedSerialExecutor() }
}
#endif

extension StoreExecutor {
    /// Names the executor whose queue is running, for `isCurrent`.
    fileprivate final class Marker: @unchecked Sendable {
        weak var executor: StoreExecutor?
        init(_ executor: StoreExecutor) { self.executor = executor }
    }

    fileprivate static let key = DispatchSpecificKey<Marker>()

    /// Whether the calling code runs on this executor's queue.
    package var isCurrent: Bool { DispatchQueue.getSpecific(key: Self.key)?.executor === self }

    /// Whether the calling code runs on any store's queue.
    package static var isOnStoreQueue: Bool { DispatchQueue.getSpecific(key: key)?.executor != nil }
}
