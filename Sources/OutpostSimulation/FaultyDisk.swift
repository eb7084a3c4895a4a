import CFaultVFS
import Foundation
import OutpostCore
import OutpostSQLite

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
        /// The power goes at a write or a sync (of a disk that keeps writes
        /// in memory until synced: see ``FaultyDisk/init(keepingOnlySynced:)``).
        public static let power = Operations(rawValue: Int32(OUTPOST_FAULT_POWER))
    }

    private static let counter = Counter()
    /// The VFS name to open stores with.
    public let name: String

    /// The folders of product files this disk models (nil: none).
    private var files: [VolatileFiles] = []

    public init() {
        name = "outpost-faulty-\(Self.counter.next())"
        // Registering starts SQLite: its process-wide settings go first.
        _ = SQLiteConnection.allocationCountsOff
        _ = outpost_fault_vfs_register(name)
    }

    /// A disk that can lose its power: databases opened through it from
    /// now on keep what is written in memory until it is synced, and the
    /// files under `folders` are kept as they were at their last sync (see
    /// ``losePower()``).
    public convenience init(keepingOnlySynced folders: [String]) throws {
        self.init()
        outpost_fault_vfs_set_volatile(name, 1)
        files = try folders.map { try VolatileFiles(root: $0) }
    }

    deinit { files.forEach { $0.stop() } }

    /// The power goes now: every database write and every file byte not
    /// synced is gone, every open handle fails from now on, and nothing
    /// opens until ``powerOn()`` (close what was open first: a new process
    /// starts with nothing of the old one).
    public func losePower() {
        outpost_fault_vfs_lose_power(name)
        dropUnsyncedFiles()
    }

    /// The power goes at the (`after`+1)-th write or sync from now on: in
    /// the middle of a transaction, a checkpoint or a commit's sync.
    public func losePower(after: Int) {
        outpost_fault_vfs_arm(name, Operations.power.rawValue, after, 0)
    }

    /// Whether the power went (and was not turned on again).
    public var isPoweredOff: Bool { outpost_fault_vfs_is_powered_off(name) != 0 }

    /// The machine starts again on what the disk kept. The product files
    /// lose what they had not synced here too, when the power went during a
    /// database write (the files' model cannot hear that moment).
    public func powerOn() {
        if isPoweredOff { dropUnsyncedFiles() }
        outpost_fault_vfs_disarm(name)
        outpost_fault_vfs_power_on(name)
    }

    /// What the modelled folders hold now is on the disk (files copied in
    /// by a restore, then synced).
    public func syncFiles() { files.forEach { $0.syncAll() } }

    /// A URI naming `path` on the platform's own disk, past this one's
    /// faults (where a copy such as a backup is written).
    public static func plainURI(_ path: String) -> String {
        let escaped = path.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "?", with: "%3f")
            .replacingOccurrences(of: "#", with: "%23")
        return "file:\(escaped)?vfs=\(String(cString: outpost_fault_vfs_base_name()))"
    }

    /// Power losses so far.
    public var powerLosses: Int { outpost_fault_vfs_power_losses(name) }

    private func dropUnsyncedFiles() { files.forEach { $0.losePower() } }

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
