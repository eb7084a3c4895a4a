/// When to try again after a failure.
///
/// "Not now" failures (no network, timeouts, 429/5xx) back off exponentially
/// with full jitter up to a cap and never use up the budget. "No" failures
/// (the server refused the request as malformed) use the budget; when it is
/// spent the engine stops retrying on its own and reports it.
public struct RetryPolicy: Sendable, Equatable {
    /// The first wait's upper bound.
    public var base: Duration
    /// The longest wait.
    public var cap: Duration
    /// Permanent failures of one change before the engine stops retrying it
    /// by itself (at least one: a change is always sent once).
    public var budget: Int

    /// Creates a policy; the defaults are a 1 s first wait, a 120 s cap and a budget of 5.
    public init(base: Duration = .seconds(1), cap: Duration = .seconds(120), budget: Int = 5) {
        self.base = base
        self.cap = cap
        self.budget = budget
    }

    /// Full jitter: a random wait between zero and `min(cap, base · 2^attempt)`,
    /// so a thousand devices failing together do not return together.
    public func delay(afterAttempt attempt: Int, random: inout some RandomNumberGenerator) -> Duration {
        let exponent = min(max(attempt, 0), 30)
        let ceiling = min(cap, base * (1 << exponent))
        let nanoseconds = ceiling.components.seconds * 1_000_000_000 + ceiling.components.attoseconds / 1_000_000_000
        guard nanoseconds > 0 else { return .zero }
        return .nanoseconds(Int64.random(in: 0...nanoseconds, using: &random))
    }

    /// The wait the server asked for, with a little jitter on top so the
    /// retries it spaced do not bunch up again.
    public func delay(retryAfter seconds: Int, random: inout some RandomNumberGenerator) -> Duration {
        let bounded = min(max(seconds, 0), 3600)
        return .seconds(bounded) + .milliseconds(Int64.random(in: 0...250, using: &random))
    }
}
