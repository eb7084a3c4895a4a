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

/// A built product of this package, run as a child process in tests.
public enum ChildProcess {
    public struct Output: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
    }

    /// An executable built next to the running test bundle (`outpost`, a helper).
    public static func product(_ name: String) -> URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent(name)
    }

    /// Runs to completion; `environment` is added to this process's own.
    public static func run(_ executable: URL, _ arguments: [String], environment: [String: String] = [:]) throws -> Output {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try ProcessLauncher.run(process)
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Output(
            status: process.terminationStatus, stdout: String(decoding: out, as: UTF8.self),
            stderr: String(decoding: err, as: UTF8.self))
    }
}
#endif
