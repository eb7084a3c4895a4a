public import Foundation

/// Runs blocking work (waiting on a child process, reading its pipe) on a
/// thread of its own, so it never holds one of the few threads Swift
/// concurrency shares between all running tests (two on a 2-core machine).
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result(catching: body)) }
    }
}

#if os(Linux) || os(macOS)
/// Starts child processes one at a time: Foundation's `Process.run()` on
/// Linux is not safe to call from several threads at once (seen crashing in
/// its memcpy when parallel tests launched processes together).
public enum ProcessLauncher {
    private static let lock = NSLock()

    public static func run(_ process: Process) throws {
        lock.lock()
        defer { lock.unlock() }
        try process.run()
    }
}
#endif
