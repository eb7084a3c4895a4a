import CFaultVFS
import Foundation
import OutpostCore

/// A device's disk that fails on request: full, failing syncs, failing
/// reads. Stores opened with `vfs: disk.name` go through it; every disk has
/// its own schedule, so parallel tests and simulated devices never share one.
public final class FaultyDisk: @unchecked Sendable {
    // @unchecked Sendable: the schedule lives in the C shim behind its own mutex.
    public struct Operations: OptionSet, Sendable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }
        /// Writes and truncations fail with "disk full".
        public static let writes = Operations(rawValue: Int32(OUTPOST_FAULT_WRITE))
        /// fsync fails with an I/O error.
        public static let syncs = Operations(rawValue: Int32(OUTPOST_FAULT_SYNC))
        /// Reads fail with an I/O error.
        public static let reads = Operations(rawValue: Int32(OUTPOST_FAULT_READ))
    }

    private static let counter = Counter()
    /// The VFS name to open stores with.
    public let name: String

    public init() {
        name = "outpost-faulty-\(Self.counter.next())"
        _ = outpost_fault_vfs_register(name)
    }

    /// The (`after`+1)-th matching operation fails; with `sticky`, every one
    /// after it too (a disk that stays full) until `heal()`.
    public func fail(_ operations: Operations, after: Int = 0, sticky: Bool = true) {
        outpost_fault_vfs_arm(name, operations.rawValue, after, sticky ? 1 : 0)
    }

    /// Space is freed, the disk works again.
    public func heal() { outpost_fault_vfs_disarm(name) }

    /// Faults injected so far.
    public var injected: Int { outpost_fault_vfs_injected(name) }

    /// Matching operations since the last `fail`.
    public var operations: Int { outpost_fault_vfs_operations(name) }

    final class Counter: Sendable {
        private let value = Locked(0)
        func next() -> Int {
            value.withLock {
                $0 += 1
                return $0
            }
        }
    }
}
