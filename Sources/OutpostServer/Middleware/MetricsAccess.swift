import Foundation
import OutpostCore

/// Who may read `/metrics`: anyone with `metricsPublic`, else the
/// configured metrics token or an administrator's token.
struct MetricsAccess: Middleware {
    func prepare(_ request: inout RouteRequest, server: SyncServer) throws {
        let config = server.config
        guard !config.metricsPublic else { return }
        if let given = Authentication.bearer(request.http), let expected = config.metricsToken,
            Self.sameText(given, expected)
        {
            return
        }
        var caller = request
        try Authentication().prepare(&caller, server: server)
        try DeviceSightingNote().prepare(&caller, server: server)
        guard caller.principal?.role == .admin else {
            throw APIError(.forbidden, "Metrics are for administrators: use an admin token or the server's metrics token.")
        }
    }

    /// Compares two secrets in time that does not depend on where they differ.
    static func sameText(_ given: String, _ expected: String) -> Bool {
        let a = Array(given.utf8)
        let b = Array(expected.utf8)
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for index in 0..<max(a.count, b.count) {
            difference |= (index < a.count ? a[index] : 0) ^ (index < b.count ? b[index] : 0)
        }
        return difference == 0
    }
}
