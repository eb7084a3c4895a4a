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

    /// Two cores this process may run on, one for the device and one for
    /// the server; nil when there are not two (or no `taskset`).
    static func twoCores() -> (device: Int, server: Int)? {
        #if os(Linux)
        guard FileManager.default.isExecutableFile(atPath: taskset), let list = allowedCores(getpid()) else { return nil }
        var cores: [Int] = []
        for part in list.split(separator: ",") {
            let bounds = part.split(separator: "-").compactMap { Int($0) }
            if bounds.count == 2, bounds[0] <= bounds[1] { cores += Array(bounds[0]...bounds[1]) } else if bounds.count == 1 { cores.append(bounds[0]) }
        }
        return cores.count >= 2 ? (cores[0], cores[1]) : nil
        #else
        return nil
        #endif
    }

    /// Pins every thread `pid` has now to `core` (threads made later
    /// inherit the core of the thread that makes them). Whether the
    /// process's main thread now has that core, read back from the kernel.
    @discardableResult
    static func pin(_ pid: pid_t, to core: Int) -> Bool {
        pin(pid, toList: String(core))
    }

    /// Pins every thread of `pid` to the cores `list` names (`0-1`, `2,3`),
    /// as `allowedCores` gave them: how a pinned process is given back the
    /// cores it had.
    @discardableResult
    static func pin(_ pid: pid_t, toList list: String) -> Bool {
        guard let tool = try? SpawnedProcess(URL(fileURLWithPath: taskset), ["--all-tasks", "--cpu-list", "--pid", list, String(pid)])
        else { return false }
        tool.waitUntilExit()
        return allowedCores(pid) == list
    }

    /// The cores the kernel lets `pid`'s main thread run on, as a list (`1`, `0-1`).
    static func allowedCores(_ pid: pid_t) -> String? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        let line = status.split(separator: "\n").first { $0.hasPrefix("Cpus_allowed_list:") }
        return line.map { $0.dropFirst("Cpus_allowed_list:".count).trimmingCharacters(in: .whitespaces) }
    }
}
