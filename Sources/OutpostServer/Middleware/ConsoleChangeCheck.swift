import Foundation
import OutpostCore

/// A console request that changes something must come from the console's
/// own pages and carry the session's CSRF token.
struct ConsoleChangeCheck: Middleware {
    func prepare(_ request: inout RouteRequest, server: SyncServer) throws {
        try Self.sameOrigin(request.http)
        guard let session = request.consoleSession, let sent = request.http.headers["x-csrf-token"],
            Self.constantTimeEqual(sent, session.csrf)
        else { throw Self.noCSRF }
    }

    static let noCSRF = APIError(.forbidden, "This change carries no valid CSRF token. Reload the console and try again.")

    /// A browser's cross-site request is refused before anything else: the
    /// cookie is `SameSite=Strict` already, and this holds for browsers
    /// that send `Origin` or `Sec-Fetch-Site` but predate SameSite.
    static func sameOrigin(_ request: HTTPRequest) throws {
        let refused = APIError(.forbidden, "This request came from another site; the console only accepts its own pages' requests.")
        if let site = request.headers["sec-fetch-site"], site == "cross-site" || site == "same-site" { throw refused }
        guard let origin = request.headers["origin"] else { return }
        guard let host = request.headers["host"], origin == "http://\(host)" || origin == "https://\(host)" else { throw refused }
    }

    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let left = Array(a.utf8)
        let right = Array(b.utf8)
        guard left.count == right.count else { return false }
        var difference: UInt8 = 0
        for index in left.indices { difference |= left[index] ^ right[index] }
        return difference == 0
    }
}
