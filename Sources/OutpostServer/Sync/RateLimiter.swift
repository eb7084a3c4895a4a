import Foundation
import OutpostCore

/// Requests per user over time (docs/protocol.md: 429 `rate_limited` with
/// Retry-After), so one misbehaving client — a retry loop, a stuck queue
/// resent in a tight loop — cannot take the server from everyone else.
///
/// A token bucket per user: `burst` requests at once, refilled at
/// `perMinute`. Counted per server process. Thread-safe.
final class RateLimiter: Sendable {
    private let limit: ServerConfig.RateLimit
    private let clock: any WallClock
    private let buckets = Locked<[String: (tokens: Double, at: Date)]>([:])

    init(_ limit: ServerConfig.RateLimit, clock: any WallClock) {
        self.limit = limit
        self.clock = clock
    }

    /// Takes one request from the user's bucket, or throws 429 with the
    /// seconds until the next one is allowed.
    func admit(_ user: String) throws {
        let now = clock.now()
        let perSecond = Double(limit.perMinute) / 60
        let wait: Double? = buckets.withLock { buckets in
            var bucket = buckets[user] ?? (Double(limit.burst), now)
            // A clock set back refills nothing.
            bucket.tokens = min(Double(limit.burst), bucket.tokens + max(0, now.timeIntervalSince(bucket.at)) * perSecond)
            bucket.at = now
            defer { buckets[user] = bucket }
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                return nil
            }
            return (1 - bucket.tokens) / perSecond
        }
        if let wait {
            throw APIError(
                .rateLimited, "Too many requests from this account. The app will try again by itself shortly.",
                retryAfter: max(1, Int(wait.rounded(.up))))
        }
    }
}
