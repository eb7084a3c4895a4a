#if os(Linux) || os(macOS)
public import Foundation
import OutpostCore
#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawn`, for tests.
///
/// Not Foundation's `Process`: on Linux its `run()` reads past the end of a
/// `dirent` while listing `/proc/self/fd` and crashes about one test run in
/// four here (swift-corelibs-foundation PR #5472; seen in this suite as a
/// SIGSEGV in `memcpy` under `Process.run()`, even with launches serialised).
/// Our own pipes are close-on-exec, so a child never holds another's.
public final class SpawnedProcess: Sendable {

    /// Where a child's output goes.
    public enum Output: Sendable {
        case discard
        /// A pipe this process reads (`standardOutput` / `standardError`).
        case pipe
        /// Appended to a file.
        case file(String)
    }

    public let processIdentifier: pid_t
    /// The read end of the child's stdout when it is `.pipe`.
    public let standardOutput: FileHandle?
    public let standardError: FileHandle?
    /// The wait status once the child was reaped.
    private let status = Locked<Int32?>(nil)

    /// Starts `executable`; `environment` is added to this process's own.
    public init(
        _ executable: URL, _ arguments: [String], environment: [String: String] = [:], stdout: Output = .discard,
        stderr: Output = .discard
    ) throws {
        Self.spawning.lock()
        defer { Self.spawning.unlock() }
        #if canImport(Glibc)
        var actions = posix_spawn_file_actions_t()
        #else
        var actions: posix_spawn_file_actions_t? = nil
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        var readEnds: [FileHandle?] = []
        var writeEnds: [Int32] = []
        for (target, output) in [(Int32(1), stdout), (Int32(2), stderr)] {
            switch output {
            case .discard:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_WRONLY, 0)
                readEnds.append(nil)
            case .file(let path):
                posix_spawn_file_actions_addopen(&actions, target, path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
                readEnds.append(nil)
            case .pipe:
                var fds: [Int32] = [0, 0]
                guard Self.makePipe(&fds) else { throw SpawnError(reason: "pipe failed: errno \(errno)") }
                posix_spawn_file_actions_adddup2(&actions, fds[1], target)
                writeEnds.append(fds[1])
                readEnds.append(FileHandle(fileDescriptor: fds[0], closeOnDealloc: true))
            }
        }
        let argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
        let merged = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let code = posix_spawn(&pid, executable.path, &actions, nil, argv, envp)
        // The child has its copies; ours would keep the pipes open forever.
        writeEnds.forEach { close($0) }
        guard code == 0 else { throw SpawnError(reason: "posix_spawn \(executable.path): \(String(cString: strerror(code)))") }
        processIdentifier = pid
        standardOutput = readEnds[0]
        standardError = readEnds[1]
    }

    /// A pipe whose ends are close-on-exec. Spawns are serialised (`spawning`),
    /// so no other child can be started between `pipe` and `fcntl` and inherit it.
    private static func makePipe(_ fds: inout [Int32]) -> Bool {
        guard pipe(&fds) == 0 else { return false }
        fds.forEach { _ = fcntl($0, F_SETFD, FD_CLOEXEC) }
        return true
    }

    private static let spawning = NSLock()

    public struct SpawnError: Error, CustomStringConvertible {
        public var reason: String
        public var description: String { reason }
    }

    /// Whether the child has not exited yet (reaps it when it has).
    public var isRunning: Bool {
        status.withLock { status in
            if status != nil { return false }
            var raw: Int32 = 0
            if waitpid(processIdentifier, &raw, WNOHANG) == processIdentifier {
                status = raw
                return false
            }
            return true
        }
    }

    /// Blocks until the child exits.
    public func waitUntilExit() {
        status.withLock { status in
            guard status == nil else { return }
            var raw: Int32 = 0
            while waitpid(processIdentifier, &raw, 0) == -1 && errno == EINTR {}
            status = raw
        }
    }

    /// Waits for the exit without holding a thread, at most `timeout`; a
    /// child still running then is killed and the wait fails, naming it.
    public func waitUntilExit(within timeout: Duration, _ what: String) async throws {
        let giveUp = ContinuousClock.now + timeout
        while isRunning {
            guard ContinuousClock.now < giveUp else {
                kill(processIdentifier, SIGKILL)
                waitUntilExit()
                throw WaitTimedOut(what, timeout: timeout, detail: "pid \(processIdentifier) killed")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Kills the child if it is still running after `timeout`: a child that
    /// hangs then ends with a signal instead of holding its waiter for ever.
    public func killIfRunning(after timeout: Duration) {
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
            if isRunning { kill(processIdentifier, SIGKILL) }
        }
    }

    public func signal(_ signal: Int32) {
        if isRunning { kill(processIdentifier, signal) }
    }

    /// The exit code, or -1 when a signal ended it. Waits for the exit.
    public var terminationStatus: Int32 {
        waitUntilExit()
        let raw = status.current ?? 0
        return raw & 0x7F == 0 ? (raw >> 8) & 0xFF : -1
    }

    /// Whether a signal (SIGKILL, SIGTERM…) ended the child. Waits for the exit.
    public var wasKilledBySignal: Bool {
        waitUntilExit()
        let raw = status.current ?? 0
        return raw & 0x7F != 0 && raw & 0x7F != 0x7F
    }
}
#endif
