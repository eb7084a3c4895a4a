import Foundation
import OutpostCore

/// Counts each answered request in the server's metrics, by route and
/// status, and keeps the failed ones for the console's activity page.
/// The HTTP layer calls it once an answer is queued (a stream's when its
/// headers go out), as only it knows when the request arrived.
enum RequestMetrics {
    static func answered(
        _ metrics: ServerMetrics?, method: String, path: String, longPoll: Bool, response: HTTPResponse, seconds: Double,
        requestID: String
    ) {
        guard let metrics else { return }
        let route = ServerMetrics.route(method: method, path: path, query: longPoll ? ["wait": ""] : [:])
        metrics.request(route: route, status: response.status, seconds: seconds)
        if response.status >= 400 {
            metrics.activity.failed(
                ActivityLog.ErrorEntry(
                    at: Date(), status: response.status, method: method, route: route, user: response.user,
                    requestID: requestID), body: response.body)
        }
    }
}
