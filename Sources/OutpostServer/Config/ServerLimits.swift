public import Foundation

/// Bounds on how long a PostgreSQL statement waits and runs. A server frozen
/// while holding the write lock (stopped by a debugger, swapped out, SIGSTOP)
/// would otherwise stall every other server's writes for as long as it
/// stays frozen; with these, each waiting request fails as 503 and is retried.
public struct DatabaseTimeouts: Sendable, Equatable {
    /// Seconds a statement waits for a lock (PostgreSQL `lock_timeout`).
    public var lock: TimeInterval
    /// Seconds a statement may run in all, waiting included (`statement_timeout`).
    public var statement: TimeInterval

    public init(lock: TimeInterval, statement: TimeInterval) throws {
        guard lock > 0, lock <= 3600, statement > 0, statement <= 3600 else {
            throw ConfigError("the lock and statement timeouts must be more than 0 and at most 3600 seconds")
        }
        guard lock <= statement else {
            throw ConfigError("the lock timeout must not be longer than the statement timeout")
        }
        self.lock = lock
        self.statement = statement
    }

    /// The defaults, which are valid by construction.
    public init() {
        lock = 5
        statement = 15
    }
}

/// How many sockets the HTTP server keeps open, who may hold them, and
/// for how long one may stay silent.
///
/// The cap per address counts only connections that have not yet sent a
/// request with a valid token: it keeps a flood of idle or half-sent
/// sockets from one address from taking every slot, while a thousand
/// phones behind one office or carrier address, once signed in, are
/// bounded only by their users' live cap and the total.
public struct ConnectionLimits: Sendable, Equatable {
    /// Open connections in all.
    public var total: Int
    /// Open connections from one client IP address that have not yet sent
    /// a request with a valid token.
    public var perAddress: Int
    /// Seconds a connection may send nothing (mid-request or between requests) before it is closed.
    public var idleTimeoutSeconds: Int
    /// Live channels (streams and long polls) one user may hold at once.
    public var livePerUser: Int
    /// Seconds a connection that has not yet authenticated may take to
    /// send a request's headers (from its opening, or from its previous
    /// answer) before it is cut, however it trickles them.
    package var headerDeadlineSeconds = 10

    public init(total: Int, perAddress: Int, idleTimeoutSeconds: Int, livePerUser: Int = 16) throws {
        guard (1...100_000).contains(total) else { throw ConfigError("the connection limit must be from 1 to 100000") }
        guard (1...total).contains(perAddress) else {
            throw ConfigError("the connections per address must be from 1 to the connection limit (\(total))")
        }
        guard (1...3600).contains(idleTimeoutSeconds) else {
            throw ConfigError("the idle timeout must be from 1 to 3600 seconds")
        }
        guard (1...100_000).contains(livePerUser) else {
            throw ConfigError("the live channels per user must be from 1 to 100000")
        }
        self.total = total
        self.perAddress = perAddress
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.livePerUser = livePerUser
    }

    /// The defaults, which are valid by construction.
    public init() {
        total = 16_384
        perAddress = 256
        idleTimeoutSeconds = 10
        livePerUser = 16
    }

    /// The connections libmicrohttpd itself may hold: above the total, so
    /// that a connection past it is accepted and its request answered
    /// `503` with `Retry-After` rather than left in the listen queue or
    /// refused. libmicrohttpd divides its limit among its threads, so the
    /// room is generous.
    var acceptLimit: Int { total + max(1024, total) }

    /// Open files `outpost serve` needs for these limits with `threads`
    /// request threads (each connection holds one; the pool and files a few).
    package func filesNeeded(threads: Int) -> Int { acceptLimit + threads + 256 }
}
