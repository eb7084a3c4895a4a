import Foundation
import OutpostCore

/// Each user's request budget, when the configuration sets one (429 past it).
struct RateLimitCheck: Middleware {
    func prepare(_ request: inout RouteRequest, server: SyncServer) throws {
        guard let limiter = server.limiter, let user = request.principal?.user else { return }
        try limiter.admit(user)
    }
}
