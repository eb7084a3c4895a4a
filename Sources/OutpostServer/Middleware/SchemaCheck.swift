import Foundation
import OutpostCore

/// An app whose data schema the server no longer accepts gets 426 before
/// anything is read or applied: its outbox waits for the update.
struct SchemaCheck: Middleware {
    var screensRefusals: Bool { true }

    func prepare(_ request: inout RouteRequest, server: SyncServer) throws {
        do {
            try Self.check(request.http, minimum: server.config.minSchema)
        } catch {
            // Refused, but still a device the operator should see: its app
            // version on the console, its outbox growing in /metrics. Only
            // with a good token, and nothing else of the request is read.
            if let principal = try? Authentication.principal(request.http, tokens: server.tokens) {
                var known = request
                known.principal = principal
                try? DeviceSightingNote().prepare(&known, server: server)
            }
            throw error
        }
    }

    static func check(_ request: HTTPRequest, minimum: Int?) throws {
        guard let minimum else { return }
        let declared = request.headers["outpost-schema"].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard let declared, declared >= minimum else {
            let seen = declared.map { "schema \($0)" } ?? "no schema"
            throw APIError(
                .upgradeRequired,
                "This version of the app (\(seen)) is too old for this server, which needs schema \(minimum) or newer. Update the app; your changes are kept on the device.")
        }
    }
}
