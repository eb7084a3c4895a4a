import Foundation
import OutpostCore

/// Notes the device an authenticated request names (`Outpost-Device`) as
/// seen now, whatever the request: a device that only streams or uploads
/// is seen as much as one that pulls.
struct DeviceSightingNote: Middleware {
    func prepare(_ request: inout RouteRequest, server: SyncServer) throws {
        guard let user = request.principal?.user else { return }
        server.sightings.note(request.http, user: user, at: ServerTimestamp(server.clock.now()))
    }
}
