import Foundation
import OutpostCore

/// A step that the routes of a group share: it checks or notes the request
/// before the handler, and may adjust every answer of the group after it.
protocol Middleware: Sendable {
    /// Throws to refuse the request (the error becomes its answer).
    func prepare(_ request: inout RouteRequest, server: SyncServer) throws
    /// Runs on every answer of the group's routes, errors included.
    func finish(_ response: inout HTTPResponse, request: RouteRequest)
    /// Whether it runs before the router's 405 too: a check whose answer
    /// comes first (an old app learns it must update, a console without a
    /// session that it must sign in, before either learns a method is wrong).
    var screensRefusals: Bool { get }
}

extension Middleware {
    func prepare(_ request: inout RouteRequest, server: SyncServer) throws {}
    func finish(_ response: inout HTTPResponse, request: RouteRequest) {}
    var screensRefusals: Bool { false }
}
