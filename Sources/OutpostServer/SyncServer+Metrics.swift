import Foundation
import OutpostCore

extension SyncServer {
    /// `GET /metrics`: Prometheus' text format (who may read it: `MetricsAccess`).
    func metricsPage(_ request: RouteRequest) throws -> HTTPResponse {
        let live = liveHub.counts
        let held: SQLRow?? = try? database.read { sql in
            try sql.first("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM blobs WHERE complete = 1")
        }
        let text = metrics.exposition(
            ServerMetrics.Gauges(
                longPolls: live.longPolls, streams: live.streams, database: database.waits,
                blobs: (held ?? nil).map { (count: $0.int(0), bytes: $0.int(1)) }, outboxes: outboxes.summary(at: clock.now())))
        return HTTPResponse(
            status: 200, headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8", "Cache-Control": "no-store"],
            body: Array(text.utf8))
    }
}
