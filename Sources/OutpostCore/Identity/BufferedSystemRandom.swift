import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The system's secure random bytes, read 512 at a time.
///
/// `SystemRandomNumberGenerator` asks the kernel for every 8 bytes (a
/// system call each on Linux); an id takes two of them, and a local
/// write makes one or two ids, so the calls showed in every write's profile.
/// The bytes are the same kind; only the calls are fewer. A process that
/// forks must not keep using a generator made before the fork (the child
/// would repeat the parent's buffered bytes); Outpost never forks.
package struct BufferedSystemRandom: RandomNumberGenerator, Sendable {
    private var buffer = [UInt64](repeating: 0, count: 64)
    private var used = 64

    package init() {}

    package mutating func next() -> UInt64 {
        if used == buffer.count { refill() }
        defer { used += 1 }
        return buffer[used]
    }

    private mutating func refill() {
        buffer.withUnsafeMutableBytes { bytes in
            guard let base = bytes.baseAddress else { return }
            #if canImport(Darwin)
            arc4random_buf(base, bytes.count)
            #else
            // The kernel's pool through /dev/urandom (the same source as
            // getrandom, which not every C library here declares).
            var filled = 0
            let file = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
            if file >= 0 {
                while filled < bytes.count {
                    let count = read(file, base + filled, bytes.count - filled)
                    if count > 0 {
                        filled += count
                    } else if count == 0 || errno != EINTR {
                        break
                    }
                }
                close(file)
            }
            if filled < bytes.count {
                // No device to read (a sandbox without /dev): the standard
                // generator for the rest.
                var system = SystemRandomNumberGenerator()
                for offset in filled..<bytes.count { bytes[offset] = UInt8(truncatingIfNeeded: system.next()) }
            }
            #endif
        }
        used = 0
    }
}
