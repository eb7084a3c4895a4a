import Foundation
import OutpostCore

/// One structured log line per request.
struct RequestLogLine: Encodable {
    var time = ServerTimestamp(Date()).rawValue
    var id: String
    var method: String
    var path: String
    var status: Int
    var milliseconds: Double
    var user: String?
    /// The client's address (see `HTTPServer.clientAddress`).
    var client: String?
    /// Why a 5xx was answered; absent below 500.
    var cause: String?

    enum CodingKeys: String, CodingKey {
        case time, method, path, status, user, client, cause
        case id = "request_id"
        case milliseconds = "duration_ms"
    }

    init(
        id: String, method: String, path: String, status: Int, milliseconds: Double, user: String?, client: String? = nil,
        cause: String? = nil
    ) {
        self.client = client
        self.id = id
        self.method = method
        self.path = path
        self.status = status
        self.milliseconds = (milliseconds * 1000).rounded() / 1000
        self.user = user
        self.cause = cause
    }

    /// A health check or a metrics scrape that went well: left out of the
    /// log unless asked for (a failing or refused one is always logged).
    static func isProbe(path: String, status: Int) -> Bool {
        status < 400 && (path == "/v1/health" || path == "/v1/ready" || path == "/metrics")
    }

    var text: String { String(decoding: (try? WireCoding.encode(self)) ?? Data(), as: UTF8.self) }
}
