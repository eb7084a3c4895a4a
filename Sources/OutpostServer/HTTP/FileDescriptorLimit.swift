import Foundation
#if canImport(Glibc)
import Glibc

/// Glibc imports the resource as an enum case, Darwin as a number.
private let openFiles = Int32(RLIMIT_NOFILE.rawValue)
#elseif canImport(Darwin)
import Darwin

private let openFiles = RLIMIT_NOFILE
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
        guard getrlimit(openFiles, &limit) == 0 else { return needed }
        let wanted = rlim_t(needed)
        if limit.rlim_cur < wanted {
            limit.rlim_cur = min(wanted, limit.rlim_max)
            #if canImport(Darwin)
            // macOS refuses a soft limit above OPEN_MAX even when the hard limit is unlimited.
            limit.rlim_cur = min(limit.rlim_cur, rlim_t(OPEN_MAX))
            #endif
            _ = setrlimit(openFiles, &limit)
            _ = getrlimit(openFiles, &limit)
        }
        return Int(limit.rlim_cur)
    }
}
