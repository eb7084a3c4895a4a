public import Foundation
public import OutpostCore

/// A wall clock a test moves by hand: a device clock that is wrong by days,
/// or that stands still while the test runs.
public final class ManualWallClock: WallClock, Sendable {
    private let current: Locked<Date>

    public init(_ start: Date = Date(timeIntervalSince1970: 1_796_000_000)) {
        current = Locked(start)
    }

    public func now() -> Date { current.current }

    public func advance(by seconds: TimeInterval) {
        current.withLock { $0 += seconds }
    }

    public func set(_ date: Date) {
        current.withLock { $0 = date }
    }
}
