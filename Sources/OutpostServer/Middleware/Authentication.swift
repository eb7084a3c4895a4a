import Foundation
import OutpostCore

/// Who sent the request, from its `Authorization: Bearer <token>` (an
/// opaque token or a JWT, whichever the token store accepts). Every route
/// that needs a caller gets it here, once.
struct Authentication: Middleware {
    func prepare(_ request: inout RouteRequest, server: SyncServer) throws {
        let principal = try Self.principal(request.http, tokens: server.tokens)
        request.principal = principal
        request.user = principal.user
    }

    static func principal(_ request: HTTPRequest, tokens: TokenStore) throws -> Principal {
        var token: String?
        if let header = request.headers["authorization"] {
            guard header.hasPrefix("Bearer ") else {
                throw APIError(.unauthenticated, "Sign in to continue: the Authorization header must be 'Bearer <token>'.")
            }
            token = String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        }
        return try tokens.authenticate(token)
    }

    /// The request's bearer token, if it has one (kept by live connections
    /// to end them when it is revoked).
    static func bearer(_ request: HTTPRequest) -> String? {
        guard let header = request.headers["authorization"], header.hasPrefix("Bearer ") else { return nil }
        return String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
    }
}
