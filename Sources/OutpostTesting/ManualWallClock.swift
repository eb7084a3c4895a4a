public import Foundation
public import OutpostCore

/// A wall clock a test moves by hand: a device clock that is wrong by days,
/// or that stands still while the test runs.
public final class ManualWallClock: WallClock, @unchecked Sendable {
    // @unchecked Sendable: `current` is only read or written while `lock` is held.
    private let lock = NSLock()
    private var current: Date

    public init(_ start: Date = Date(timeIntervalSince1970: 1_796_000_000)) {
        current = start
    }

    public func now() -> Date {
        lock.lock()
        defer { lock.unlock() }
        return current
    }

    public func advance(by seconds: TimeInterval) {
        lock.lock()
        current += seconds
        lock.unlock()
    }

    public func set(_ date: Date) {
        lock.lock()
        current = date
        lock.unlock()
    }
}
