import Foundation
import OutpostCore

/// Notes the device an authenticated request names (`Outpost-Device`) as
/// seen now, whatever the request: a device that only streams or uploads
/// is seen as much as one that pulls. Its outbox report is kept too.
struct DeviceSightingNote: Middleware {
    func prepare(_ request: inout RouteRequest, server: SyncServer) throws {
        guard let user = request.principal?.user else { return }
        let now = server.clock.now()
        server.sightings.note(request.http, user: user, at: ServerTimestamp(now))
        server.outboxes.note(request.http, user: user, at: now)
    }
}
