/// A clock that only moves forward, for waits between retries.
/// The wall clock may jump (or be two days wrong); this one never does.
public protocol MonotonicClock: Sendable {
    /// Time since an arbitrary origin.
    func now() -> Duration
    /// Waits for `duration`; throws if the calling task is cancelled.
    func sleep(for duration: Duration) async throws
}

/// The system's continuous clock.
public struct SystemMonotonicClock: MonotonicClock {
    private let origin = ContinuousClock.now

    /// Creates a clock whose origin is the moment of creation.
    public init() {}

    /// Time elapsed since this clock was created.
    public func now() -> Duration { ContinuousClock.now - origin }

    /// Waits for `duration`; throws if the calling task is cancelled.
    public func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }
}
