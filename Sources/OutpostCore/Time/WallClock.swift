public import Foundation

/// The device's wall clock. Used only for `local_updated_at` and display,
/// never to decide what was seen on the server.
public protocol WallClock: Sendable {
    func now() -> Date
}

/// The system's wall clock.
public struct SystemWallClock: WallClock {
    public init() {}
    public func now() -> Date { Date() }
}
