import Foundation
import OutpostCore

extension SyncServer {
    /// `GET /metrics`: Prometheus' text format, for an admin token, the
    /// configured metrics token, or anyone with `metricsPublic`.
    func metricsAnswer(_ request: HTTPRequest) throws -> HTTPResponse {
        guard request.method == "GET" else { throw APIError(.methodNotAllowed, "This endpoint only answers GET.") }
        if !config.metricsPublic {
            let token = Self.bearer(request)
            let isMetricsToken = token.flatMap { given in config.metricsToken.map { Self.sameText(given, $0) } } ?? false
            if !isMetricsToken {
                let principal = try tokens.authenticate(token)
                guard principal.role == .admin else {
                    throw APIError(.forbidden, "Metrics are for administrators: use an admin token or the server's metrics token.")
                }
            }
        }
        let live = liveHub.counts
        let held: SQLRow?? = try? database.read { sql in
            try sql.first("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM blobs WHERE complete = 1")
        }
        let text = metrics.exposition(
            ServerMetrics.Gauges(
                longPolls: live.longPolls, streams: live.streams, database: database.waits,
                blobs: (held ?? nil).map { (count: $0.int(0), bytes: $0.int(1)) }))
        return HTTPResponse(
            status: 200, headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8", "Cache-Control": "no-store"],
            body: Array(text.utf8))
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
