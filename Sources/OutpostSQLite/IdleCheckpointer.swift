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
///
/// Bulk commits (a page of a first download: hundreds of WAL pages each) are
/// the exception. Their stream has no pause, and the writer's own
/// checkpoints then stood in its way: a fifth of a first download's CPU,
/// every 16 MB, while the next page waited. After a bulk commit the copy
/// starts at once on the checkpointer's thread, beside the writer's next
/// page; the writer checkpoints itself only past `bulkBackstop`.
///
/// A first download is held (`hold`): its commits only append to the WAL
/// until it ends, and one checkpoint copies every page once, in the pause
/// after it, instead of the checkpoints of each batch taking the two cores
/// and the disk from the download and the server. The WAL holds the
/// download meanwhile (up to `heldBackstop`); each commit is as durable as
/// its transaction asked (a download's last page syncs every page before
/// it): only when the copy into the main file runs changes.
package final class IdleCheckpointer: @unchecked Sendable {
    /// WAL pages after which a checkpoint waits for a pause (SQLite's default).
    package static let threshold: Int32 = 1_000
    /// WAL pages after which the writer checkpoints itself (16 MB of 4 kB pages).
    package static let backstop: Int32 = 4_000
    /// The pause without commits that lets a checkpoint run (50 ms).
    static let idleNanoseconds: UInt64 = 50_000_000
    /// The pause that lets the checkpoint after a held load run (250 ms):
    /// the sync cycle goes on a little after its last page (reads, a push),
    /// and a copy of the whole load would take the cores from it.
    static let afterLoadNanoseconds: UInt64 = 250_000_000
    /// A commit that adds this many WAL pages (1 MB) or more is bulk.
    package static let bulkCommitPages: Int32 = 256
    /// WAL pages after which the writer checkpoints itself under bulk commits (64 MB).
    package static let bulkBackstop: Int32 = 16_000
    /// WAL pages after which a held load checkpoints as bulk commits do (256 MB).
    package static let heldBackstop: Int32 = 65_536

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
        let step = Self.step(walPages: walPages, before: walPagesBefore, held: isHeld)
        walPagesBefore = walPages
        return run(step)
    }

    /// Called by the writer: while `held`, commits leave the WAL to grow
    /// (up to `heldBackstop`); on release, a WAL past `threshold` is
    /// checkpointed once no commit has come for 250 ms, then emptied.
    func hold(_ held: Bool) {
        guard held != isHeld else { return }
        isHeld = held
        guard !held, walPagesBefore >= Self.threshold else { return }
        // The WAL file grew to the whole load: once copied, it is emptied
        // (SQLite would keep its size on the disk until the store closes).
        state.truncateNext()
        guard state.committed(at: DispatchTime.now(), bulk: false) else { return }
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(Self.afterLoadNanoseconds))) { [self] in checkpointWhenIdle() }
    }

    /// Whether a load holds checkpoints back (written by the writer only).
    private var isHeld = false

    private func run(_ step: Step) -> Bool {
        switch step {
        case .none: return false
        case .inCommit: return true
        case .afterPause, .atOnce:
            let atOnce = step == .atOnce
            guard state.committed(at: DispatchTime.now(), bulk: atOnce) else { return false }
            queue.asyncAfter(deadline: .now() + .nanoseconds(atOnce ? 0 : Int(Self.idleNanoseconds))) { [self] in
                checkpointWhenIdle()
            }
            return false
        }
    }

    /// What a commit that left `walPages` in the WAL asks for, the WAL
    /// having held `before` after the commit before it.
    package enum Step: Equatable, Sendable {
        /// Nothing yet: the WAL is small.
        case none
        /// A checkpoint on the checkpointer's connection once no commit has come for 50 ms.
        case afterPause
        /// A checkpoint on the checkpointer's connection now: the commit was bulk.
        case atOnce
        /// The committing connection checkpoints itself: the WAL reached its backstop.
        case inCommit
    }

    package static func step(walPages: Int32, before: Int32, held: Bool = false) -> Step {
        // The WAL starts again from its first page after a full checkpoint.
        let added = walPages >= before ? walPages - before : walPages
        if held {
            // Past its backstop a held load checkpoints beside its writes,
            // and in its own commits only if those fall behind.
            if walPages < heldBackstop { return .none }
            return walPages >= heldBackstop + bulkBackstop ? .inCommit : .atOnce
        }
        let bulk = added >= bulkCommitPages
        if walPages >= (bulk ? bulkBackstop : backstop) { return .inCommit }
        guard walPages >= threshold else { return .none }
        return bulk ? .atOnce : .afterPause
    }

    /// The WAL's size at the writer's last commit (written by the writer only).
    private var walPagesBefore: Int32 = 0

    /// On `queue`: checkpoints if no commit came during the last 50 ms or
    /// the last one was bulk, or looks again once that much time has passed
    /// since the last one.
    private func checkpointWhenIdle() {
        guard !isClosed else { return state.finished(ok: nil) }
        let afterBulk: Bool
        switch state.turn(now: DispatchTime.now(), idle: state.truncatePending ? Self.afterLoadNanoseconds : Self.idleNanoseconds) {
        case .later(let wait):
            queue.asyncAfter(deadline: .now() + .nanoseconds(Int(wait))) { [self] in checkpointWhenIdle() }
            return
        case .now(let bulk):
            afterBulk = bulk
        }
        if handle == nil { handle = open() }
        guard let handle else { return state.finished(ok: false) }
        // -1 frames: the connection does not see the file in WAL mode.
        var walFrames: Int32 = -1
        var copied: Int32 = -1
        let code = sqlite3_wal_checkpoint_v2(handle, "main", SQLITE_CHECKPOINT_PASSIVE, &walFrames, &copied)
        if code == SQLITE_OK, copied == walFrames, state.takeTruncate() {
            // Nothing left to copy, so this holds the write lock only to empty
            // the file; with a write or a read under way it gives up (no busy
            // handler) and the WAL keeps its size until the next one.
            sqlite3_wal_checkpoint_v2(handle, "main", SQLITE_CHECKPOINT_TRUNCATE, nil, nil)
        }
        state.finished(ok: code == SQLITE_OK && walFrames >= 0, besideWrites: afterBulk)
    }

    /// How many checkpoints ran on the checkpointer's connection, how many
    /// of them failed, and how many started at once after a bulk commit.
    var runs: (completed: Int, failed: Int, besideWrites: Int) { state.runs }

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
        // A checkpoint syncs the database file before the WAL may be reused
        // (said here rather than left to how SQLite was built); on Apple
        // platforms that sync must reach the drive itself, or a power loss
        // could find the WAL restarted over pages the database file never got.
        sqlite3_exec(handle, "PRAGMA synchronous = FULL", nil, nil, nil)
        #if canImport(Darwin)
        sqlite3_exec(handle, "PRAGMA checkpoint_fullfsync = ON", nil, nil, nil)
        #endif
        return handle
    }
}

/// The checkpointer's state shared by the writer's thread and its queue.
private final class CheckpointState: @unchecked Sendable {
    private let lock = NSLock()
    /// Whether a checkpoint is waiting for a pause (or running).
    private var isWaiting = false
    private var lastCommit = DispatchTime(uptimeNanoseconds: 0)
    private var lastCommitWasBulk = false
    private var completed = 0
    private var failed = 0
    private var besideWrites = 0
    private var truncate = false

    /// The next checkpoint that copies every frame also empties the WAL file.
    func truncateNext() {
        lock.lock()
        truncate = true
        lock.unlock()
    }

    var truncatePending: Bool {
        lock.lock()
        defer { lock.unlock() }
        return truncate
    }

    func takeTruncate() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        defer { truncate = false }
        return truncate
    }

    /// Notes a commit; true when no checkpoint is waiting yet and the
    /// caller should schedule one.
    func committed(at time: DispatchTime, bulk: Bool) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        lastCommit = time
        lastCommitWasBulk = bulk
        if isWaiting { return false }
        isWaiting = true
        return true
    }

    /// When a waiting checkpoint may run.
    enum Turn {
        /// Now: `idle` nanoseconds passed since the last commit, or that
        /// commit was bulk (`afterBulk`: no pause is waited for).
        case now(afterBulk: Bool)
        /// Once this many more nanoseconds pass without a commit.
        case later(UInt64)
    }

    func turn(now: DispatchTime, idle: UInt64) -> Turn {
        lock.lock()
        defer { lock.unlock() }
        if lastCommitWasBulk { return .now(afterBulk: true) }
        let since = now.uptimeNanoseconds &- lastCommit.uptimeNanoseconds
        return since >= idle ? .now(afterBulk: false) : .later(idle - since)
    }

    func finished(ok: Bool?, besideWrites: Bool = false) {
        lock.lock()
        isWaiting = false
        if let ok {
            if ok { completed += 1 } else { failed += 1 }
            if ok, besideWrites { self.besideWrites += 1 }
        }
        lock.unlock()
    }

    var runs: (completed: Int, failed: Int, besideWrites: Int) {
        lock.lock()
        defer { lock.unlock() }
        return (completed, failed, besideWrites)
    }
}
