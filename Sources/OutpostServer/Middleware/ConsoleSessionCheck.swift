import Foundation
import OutpostCore

/// The console's API past sign-in needs the session cookie; the session's
/// administrator is the request's user.
struct ConsoleSessionCheck: Middleware {
    var screensRefusals: Bool { true }

    func prepare(_ request: inout RouteRequest, server: SyncServer) throws {
        let cookie = ConsoleSessions.cookie(in: request.http.headers["cookie"])
        let session = try server.consoleSessions.session(cookie: cookie)
        request.consoleSession = session
        request.user = session.user
    }
}
