/// A clock that only moves forward, for waits between retries.
/// The wall clock may jump (or be two days wrong); this one never does.
public protocol MonotonicClock: Sendable {
    /// Time since an arbitrary origin.
    func now() -> Duration
    func sleep(for duration: Duration) async throws
}

/// The system's continuous clock.
public struct SystemMonotonicClock: MonotonicClock {
    private let origin = ContinuousClock.now

    public init() {}

    public func now() -> Duration { ContinuousClock.now - origin }

    public func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }
}
