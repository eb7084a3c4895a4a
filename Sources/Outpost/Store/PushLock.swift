import Foundation

/// A lock file beside the database, held by the process whose push is on
/// the wire (from taking a batch until its last lease ends).
///
/// An app and its extensions may open one store file: any of them may
/// write, but only one push may be in flight across them, so an entry is
/// sent by one process only. A process that opens the store resets records
/// left "sending" only when no other process holds this lock: they were
/// left by a process that died, not by one still pushing. Held only while
/// a push is in flight, never for a whole session: iOS ends a suspended app
/// that holds a file lock in a shared container.
final class PushLock {
    let path: String
    private var descriptor: Int32 = -1

    init(databasePath: String) { path = databasePath + ".outpost-push" }

    deinit { release() }

    var isHeld: Bool { descriptor >= 0 }

    /// Takes the lock unless another process holds it; false only then.
    func tryAcquire() -> Bool {
        if isHeld { return true }
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        // A lock file that cannot be made (a read-only filesystem) guards
        // nothing, and such a store writes nothing: no process is held up.
        guard fd >= 0 else { return true }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            return false
        }
        descriptor = fd
        return true
    }

    /// Waits up to `timeout` for another process's push to end.
    func acquire(waitingAtMost timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !tryAcquire() {
            guard ContinuousClock.now < deadline else { return false }
            usleep(5_000)
        }
        return true
    }

    func release() {
        guard isHeld else { return }
        // Closing the descriptor drops the lock.
        close(descriptor)
        descriptor = -1
    }
}
