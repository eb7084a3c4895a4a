import Foundation
import OutpostCore

/// A request on its way through its route's middleware to the handler,
/// with what the middleware learned about it.
struct RouteRequest: Sendable {
    var http: HTTPRequest
    /// The pattern's `:name` segments, as the path gave them.
    var parameters: [String: String] = [:]
    /// Whether the answer may wait or stream (a socket), or must come at once (in process).
    var canWait: Bool
    /// Who sent it, once authenticated.
    var principal: Principal?
    /// Named in the request log and in error answers once known.
    var user: String?
    /// The console's signed-in administrator.
    var consoleSession: ConsoleSessions.Session?

    init(_ http: HTTPRequest, canWait: Bool) {
        self.http = http
        self.canWait = canWait
    }

    /// The value of the pattern's `:name` segment.
    func parameter(_ name: String) -> String { parameters[name] ?? "" }

    /// The authenticated caller; the route's group authenticates, so
    /// missing here is a table that forgot to.
    func caller() throws -> Principal {
        guard let principal else { throw TokenStore.Failure.missing }
        return principal
    }

    /// The console's session; see `caller()`.
    func session() throws -> ConsoleSessions.Session {
        guard let consoleSession else { throw APIError(.unauthenticated, "Sign in to the console to continue.") }
        return consoleSession
    }
}
