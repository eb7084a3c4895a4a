// Public only where `ChildProcess` (below) names Foundation's types.
#if os(Linux) || os(macOS)
public import Foundation
#else
import Foundation
#endif

/// Runs blocking work (waiting on a child process, reading its pipe) on a
/// thread of its own, so it never holds one of the few threads Swift
/// concurrency shares between all running tests (two on a 2-core machine).
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result(catching: body)) }
    }
}

#if os(Linux) || os(macOS)
/// A built product of this package, run as a child process in tests.
public enum ChildProcess {
    public struct Output: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
    }

    /// An executable built next to the running test bundle (`outpost`, a helper).
    public static func product(_ name: String) -> URL {
        #if os(Linux)
        return URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent(name)
        #else
        // No /proc: the bundle whose binary holds this code (the test bundle,
        // or the folder of a command-line tool) sits beside the products.
        let bundle = Bundle(for: PendingRead.self)
        let folder = bundle.bundlePath.hasSuffix(".xctest") ? bundle.bundleURL.deletingLastPathComponent() : bundle.bundleURL
        return folder.appendingPathComponent(name)
        #endif
    }

    /// Runs to completion; `environment` is added to this process's own. A
    /// child still running after `timeout` is killed (its status is then -1),
    /// so a hung command fails its test instead of holding the run.
    public static func run(
        _ executable: URL, _ arguments: [String], environment: [String: String] = [:], timeout: Duration = .seconds(180)
    ) throws -> Output {
        let process = try SpawnedProcess(executable, arguments, environment: environment, stdout: .pipe, stderr: .pipe)
        process.killIfRunning(after: timeout)
        // Both pipes are drained at once: a child filling one while we wait on the other would never finish.
        let errors = Thread.detachedRead(process.standardError!)
        let out = process.standardOutput!.readDataToEndOfFile()
        let err = errors.wait()
        return Output(
            status: process.terminationStatus, stdout: String(decoding: out, as: UTF8.self),
            stderr: String(decoding: err, as: UTF8.self))
    }
}

extension Thread {
    /// Reads a file handle to its end on a thread of its own.
    static func detachedRead(_ handle: FileHandle) -> PendingRead {
        let pending = PendingRead()
        Thread.detachNewThread { pending.finish(handle.readDataToEndOfFile()) }
        return pending
    }
}

/// The result of a read running on another thread.
final class PendingRead: @unchecked Sendable {
    // @unchecked Sendable: `data` is only touched while `condition` is held.
    private let condition = NSCondition()
    private var data: Data?

    func finish(_ value: Data) {
        condition.lock()
        data = value
        condition.broadcast()
        condition.unlock()
    }

    func wait() -> Data {
        condition.lock()
        defer { condition.unlock() }
        while data == nil { condition.wait() }
        return data!
    }
}
#endif
