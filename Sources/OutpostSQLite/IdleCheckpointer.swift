import Foundation
#if canImport(SQLite3)
import SQLite3
#else
import CSQLite
#endif

/// Copies a WAL database's committed pages back into the main file while
/// the writer is idle, on a connection and a thread of its own.
///
/// SQLite's default runs that copy (a checkpoint: read the WAL, write the
/// pages, sync both files) inside whichever commit takes the WAL past 1,000
/// pages; that one write then takes many times as long as the others. Run
/// on another thread *while writes go on*, it is no better: on this kind of
/// machine the checkpoint's syncs stall the writer's own file writes, and
/// every write made meanwhile is slowed (local-write p99 rose from 2.3x to
/// 3-4x the bare insert). So the copy waits for a pause: past `threshold`
/// pages, a checkpoint runs once no commit has come for 50 ms (an app's
/// writes come in bursts: a form saved, a photo taken). Under a steady
/// stream (a first download, a bulk import) there is no pause; once the WAL
/// passes `backstop` pages the writer's own commit checkpoints, as SQLite
/// would, four times less often than SQLite's default: fewer copies of the
/// pages written again and again, and the WAL never grows without bound.
final class IdleCheckpointer: @unchecked Sendable {
    /// WAL pages after which a checkpoint waits for a pause (SQLite's default).
    static let threshold: Int32 = 1_000
    /// WAL pages after which the writer checkpoints itself (16 MB of 4 kB pages).
    static let backstop: Int32 = 4_000
    /// The pause without commits that lets a checkpoint run (50 ms).
    static let idleNanoseconds: UInt64 = 50_000_000

    private let queue = DispatchQueue(label: "outpost.sqlite.checkpoint")
    private let path: String
    private let flags: Int32
    private let vfs: String?
    /// Read and written on `queue` only.
    private var handle: OpaquePointer?
    private var isClosed = false
    private let state = CheckpointState()

    init(path: String, flags: Int32, vfs: String?) {
        self.path = path
        self.flags = flags
        self.vfs = vfs
    }

    /// Called by the writer after a commit, with the WAL's size in pages.
    /// Returns whether the writer should checkpoint itself (the backstop).
    func committed(walPages: Int32) -> Bool {
        if walPages >= Self.backstop { return true }
        guard walPages >= Self.threshold, state.committed(at: DispatchTime.now()) else { return false }
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(Self.idleNanoseconds))) { [self] in checkpointWhenIdle() }
        return false
    }

    /// On `queue`: checkpoints if no commit came during the last 50 ms,
    /// or looks again once that much time has passed since the last one.
    private func checkpointWhenIdle() {
        guard !isClosed else { return state.finished(ok: nil) }
        if let wait = state.nanosecondsToIdle(now: DispatchTime.now(), idle: Self.idleNanoseconds) {
            queue.asyncAfter(deadline: .now() + .nanoseconds(Int(wait))) { [self] in checkpointWhenIdle() }
            return
        }
        if handle == nil { handle = open() }
        guard let handle else { return state.finished(ok: false) }
        // -1 frames: the connection does not see the file in WAL mode.
        var walFrames: Int32 = -1
        let code = sqlite3_wal_checkpoint_v2(handle, "main", SQLITE_CHECKPOINT_PASSIVE, &walFrames, nil)
        state.finished(ok: code == SQLITE_OK && walFrames >= 0)
    }

    /// How many idle-time checkpoints ran, and how many of them failed.
    var runs: (completed: Int, failed: Int) { state.runs }

    /// Waits for a running checkpoint, then closes the queue's connection.
    /// Called before the writer's connection closes, so that one is the last
    /// and SQLite's own checkpoint-on-close copies the rest and removes the WAL.
    func close() {
        queue.sync {
            isClosed = true
            if let handle { sqlite3_close_v2(handle) }
            handle = nil
        }
    }

    private func open() -> OpaquePointer? {
        var handle: OpaquePointer?
        // A new connection learns that the file is in WAL mode when it first
        // reads it; until then a checkpoint call finds no WAL and copies nothing.
        guard sqlite3_open_v2(path, &handle, flags, vfs) == SQLITE_OK, let handle,
            sqlite3_exec(handle, "SELECT count(*) FROM sqlite_schema", nil, nil, nil) == SQLITE_OK
        else {
            if let handle { sqlite3_close_v2(handle) }
            return nil
        }
        return handle
    }
}

/// The checkpointer's state shared by the writer's thread and its queue.
private final class CheckpointState: @unchecked Sendable {
    private let lock = NSLock()
    /// Whether a checkpoint is waiting for a pause (or running).
    private var isWaiting = false
    private var lastCommit = DispatchTime(uptimeNanoseconds: 0)
    private var completed = 0
    private var failed = 0

    /// Notes a commit; true when no checkpoint is waiting yet and the
    /// caller should schedule one.
    func committed(at time: DispatchTime) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        lastCommit = time
        if isWaiting { return false }
        isWaiting = true
        return true
    }

    /// How long until `idle` nanoseconds have passed since the last
    /// commit; nil when they have.
    func nanosecondsToIdle(now: DispatchTime, idle: UInt64) -> UInt64? {
        lock.lock()
        defer { lock.unlock() }
        let since = now.uptimeNanoseconds &- lastCommit.uptimeNanoseconds
        return since >= idle ? nil : idle - since
    }

    func finished(ok: Bool?) {
        lock.lock()
        isWaiting = false
        if let ok {
            if ok { completed += 1 } else { failed += 1 }
        }
        lock.unlock()
    }

    var runs: (completed: Int, failed: Int) {
        lock.lock()
        defer { lock.unlock() }
        return (completed, failed)
    }
}
