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

/// How many sockets the HTTP server keeps open, and for how long one may
/// stay silent. The per-address cap is what keeps a flood of idle or
/// half-sent connections from one address from taking every slot; its
/// default still lets a few hundred phones behind one office NAT connect.
public struct ConnectionLimits: Sendable, Equatable {
    /// Open connections in all.
    public var total: Int
    /// Open connections from one client IP address.
    public var perAddress: Int
    /// Seconds a connection may send nothing (mid-request or between requests) before it is closed.
    public var idleTimeoutSeconds: Int

    public init(total: Int, perAddress: Int, idleTimeoutSeconds: Int) throws {
        guard (1...100_000).contains(total) else { throw ConfigError("the connection limit must be from 1 to 100000") }
        guard (1...total).contains(perAddress) else {
            throw ConfigError("the connections per address must be from 1 to the connection limit (\(total))")
        }
        guard (1...3600).contains(idleTimeoutSeconds) else {
            throw ConfigError("the idle timeout must be from 1 to 3600 seconds")
        }
        self.total = total
        self.perAddress = perAddress
        self.idleTimeoutSeconds = idleTimeoutSeconds
    }

    /// The defaults, which are valid by construction.
    public init() {
        total = 16_384
        perAddress = 256
        idleTimeoutSeconds = 10
    }
}
