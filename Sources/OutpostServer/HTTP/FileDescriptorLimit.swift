import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The process's open-file limit: every connection (a live stream, a
/// parked long poll) holds one descriptor, so `outpost serve` raises its
/// soft limit toward what its connection limit needs, as far as the hard
/// limit allows.
public enum FileDescriptorLimit {
    /// Raises the soft limit to at least `needed` where the hard limit
    /// allows; returns the soft limit now.
    @discardableResult
    public static func raise(toAtLeast needed: Int) -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return needed }
        let wanted = rlim_t(needed)
        if limit.rlim_cur < wanted {
            limit.rlim_cur = min(wanted, limit.rlim_max)
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        return Int(limit.rlim_cur)
    }
}
