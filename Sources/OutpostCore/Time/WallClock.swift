public import Foundation

/// The device's wall clock. Used only for `local_updated_at` and display,
/// never to decide what was seen on the server.
public protocol WallClock: Sendable {
    /// The device's current time.
    func now() -> Date
}

/// The system's wall clock.
public struct SystemWallClock: WallClock {
    /// The system clock.
    public init() {}
    /// The system's current time.
    public func now() -> Date { Date() }
}
