#if canImport(Darwin)
import Darwin

/// Another process's CPU time and memory on macOS, which has no /proc: the
/// kernel's task summary for a process id (`proc_pidinfo`).
enum ProcessTaskInfo {
    static func of(_ pid: pid_t) -> proc_taskinfo? {
        var info = proc_taskinfo()
        let size = Int32(MemoryLayout<proc_taskinfo>.size)
        return proc_pidinfo(pid, PROC_PIDTASKINFO, 0, &info, size) == size ? info : nil
    }

    /// User and system seconds; the kernel counts them in Mach time units
    /// (nanoseconds on Intel, not on Apple silicon).
    static func cpuSeconds(_ pid: pid_t) -> Double {
        guard let info = of(pid) else { return 0 }
        var timebase = mach_timebase_info_data_t()
        mach_timebase_info(&timebase)
        let units = Double(info.pti_total_user + info.pti_total_system)
        return units * Double(timebase.numer) / Double(timebase.denom) / 1e9
    }
}
#endif
