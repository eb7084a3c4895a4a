import Foundation
import OutpostTesting

/// Puts every thread of a process on one CPU core (Linux, with util-linux's
/// `taskset`), so a benchmark that runs a device and a server on one
/// machine can give each a core of its own, as a phone and a server each
/// have theirs.
///
/// On this 2-core machine a push's answer and the device's work on the
/// answer before it ran at the same time, beside the kernel's own threads:
/// the server's thread was preempted 1,687 times during one 10,000-record
/// drain (0.13 s of the 0.40 s it spent answering), and those waits were
/// counted as the server's.
enum CorePinning {
    static let taskset = "/usr/bin/taskset"

    /// Whether there are cores enough to give the device and the server one each.
    static var isAvailable: Bool {
        #if os(Linux)
        return ProcessInfo.processInfo.activeProcessorCount >= 2 && FileManager.default.isExecutableFile(atPath: taskset)
        #else
        return false
        #endif
    }

    /// Pins every thread `pid` has now to `core` (threads made later
    /// inherit the core of the thread that makes them); nil frees it to
    /// every core again. Whether the process's main thread now has that
    /// set, read back from the kernel.
    @discardableResult
    static func pin(_ pid: pid_t, to core: Int?) -> Bool {
        guard isAvailable else { return false }
        let cores = core.map(String.init) ?? "0-\(ProcessInfo.processInfo.activeProcessorCount - 1)"
        guard let tool = try? SpawnedProcess(URL(fileURLWithPath: taskset), ["--all-tasks", "--cpu-list", "--pid", cores, String(pid)])
        else { return false }
        tool.waitUntilExit()
        return allowedCores(pid) == cores
    }

    /// The cores the kernel lets `pid`'s main thread run on, as a list (`1`, `0-1`).
    static func allowedCores(_ pid: pid_t) -> String? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        let line = status.split(separator: "\n").first { $0.hasPrefix("Cpus_allowed_list:") }
        return line.map { $0.dropFirst("Cpus_allowed_list:".count).trimmingCharacters(in: .whitespaces) }
    }
}
