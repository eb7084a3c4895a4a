public import Foundation

/// Makes ids for records, clients and mutations.
///
/// Behind a protocol so tests and the simulation derive every id from a seed.
public protocol IDGenerator: Sendable {
    func next() -> UUID
}

/// UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random bits.
///
/// Ids made on one device sort by creation time, which keeps SQLite's primary
/// key index append-mostly. Within one millisecond a 12-bit counter in
/// `rand_a` keeps them increasing in this process.
public final class UUIDv7Generator: IDGenerator, @unchecked Sendable {
    // @unchecked Sendable: every mutable field is only touched while `lock` is held.
    private let lock = NSLock()
    private var lastMilliseconds: UInt64 = 0
    private var counter: UInt16 = 0
    private var random: any RandomNumberGenerator
    private let clock: any WallClock

    public init(clock: any WallClock = SystemWallClock(), random: any RandomNumberGenerator = SystemRandomNumberGenerator()) {
        self.clock = clock
        self.random = random
    }

    public func next() -> UUID {
        lock.lock()
        defer { lock.unlock() }
        var milliseconds = UInt64(max(0, clock.now().timeIntervalSince1970 * 1000))
        if milliseconds <= lastMilliseconds {
            // Same millisecond, or the clock stepped back: stay monotonic.
            milliseconds = lastMilliseconds
            counter &+= 1
            if counter > 0x0FFF {
                milliseconds += 1
                counter = 0
            }
        } else {
            counter = UInt16(truncatingIfNeeded: random.next() & 0x07FF)
        }
        lastMilliseconds = milliseconds
        return Self.make(milliseconds: milliseconds, counter: counter, tail: random.next())
    }

    /// Lays out the fields: time (48) | version 7 (4) | counter (12) | variant (2) | random (62).
    public static func make(milliseconds: UInt64, counter: UInt16, tail: UInt64) -> UUID {
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<6 { bytes[index] = UInt8(truncatingIfNeeded: milliseconds >> (8 * (5 - UInt64(index)))) }
        bytes[6] = 0x70 | UInt8(truncatingIfNeeded: (counter >> 8) & 0x0F)
        bytes[7] = UInt8(truncatingIfNeeded: counter)
        for index in 8..<16 { bytes[index] = UInt8(truncatingIfNeeded: tail >> (8 * (15 - UInt64(index)))) }
        bytes[8] = 0x80 | (bytes[8] & 0x3F)
        return UUID(uuid: (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
            bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }
}

extension UUID {
    /// The UUID version nibble (7 for ids made by `UUIDv7Generator`).
    public var version: Int { Int(uuid.6 >> 4) }

    /// The Unix milliseconds of a UUIDv7.
    public var v7Milliseconds: UInt64 {
        let u = uuid
        return [u.0, u.1, u.2, u.3, u.4, u.5].reduce(0) { $0 << 8 | UInt64($1) }
    }
}
