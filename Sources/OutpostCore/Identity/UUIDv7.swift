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
public final class UUIDv7Generator: IDGenerator, Sendable {
    /// What the next id builds on: the last millisecond used, the counter
    /// within it, and the random source.
    private struct State {
        var lastMilliseconds: UInt64 = 0
        var counter: UInt16 = 0
        var random: any RandomNumberGenerator
    }

    private let state: Locked<State>
    private let clock: any WallClock

    /// Ids on `clock`'s milliseconds, with the system's secure random bytes.
    public convenience init(clock: any WallClock = SystemWallClock()) {
        self.init(clock: clock, random: BufferedSystemRandom())
    }

    /// Ids from a random source of the caller's (seeded ones, in tests).
    package init(clock: any WallClock, random: any RandomNumberGenerator) {
        self.clock = clock
        self.state = Locked(State(random: random))
    }

    public func next() -> UUID {
        let now = clock.now()
        return state.withLock { state in
            var milliseconds = UInt64(max(0, now.timeIntervalSince1970 * 1000))
            if milliseconds <= state.lastMilliseconds {
                // Same millisecond, or the clock stepped back: stay monotonic.
                milliseconds = state.lastMilliseconds
                state.counter &+= 1
                if state.counter > 0x0FFF {
                    milliseconds += 1
                    state.counter = 0
                }
            } else {
                state.counter = UInt16(truncatingIfNeeded: state.random.next() & 0x07FF)
            }
            state.lastMilliseconds = milliseconds
            return Self.make(milliseconds: milliseconds, counter: state.counter, tail: state.random.next())
        }
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
    package var version: Int { Int(uuid.6 >> 4) }

    /// The Unix milliseconds of a UUIDv7.
    package var v7Milliseconds: UInt64 {
        let u = uuid
        return [u.0, u.1, u.2, u.3, u.4, u.5].reduce(0) { $0 << 8 | UInt64($1) }
    }
}
