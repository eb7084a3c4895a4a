public import Foundation

/// A request as the sync server sees it, whatever carried it (libmicrohttpd,
/// or a simulated network in tests).
public struct HTTPRequest: Sendable {
    public var method: String
    /// The path without the query string, e.g. `/v1/pull`.
    public var path: String
    /// Decoded query arguments.
    public var query: [String: String]
    /// Header names in lowercase.
    public var headers: [String: String]
    public var body: Data
    /// Arrived on a socket (libmicrohttpd), so an answer may stream its
    /// body from storage; one handled in process needs it whole.
    package var fromSocket = false
    /// Arrived over TLS (this server's, or a trusted proxy's that says so):
    /// the console's cookie is then `Secure`.
    package var overTLS = false

    public init(method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:], body: Data = Data()) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { _, last in last })
        self.body = body
    }

    /// Splits `/v1/pull?cursor=abc&limit=10` into path and decoded query.
    public init(method: String, target: String, headers: [String: String] = [:], body: Data = Data()) {
        let components = URLComponents(string: target)
        var query: [String: String] = [:]
        for item in components?.queryItems ?? [] { query[item.name] = item.value ?? "" }
        self.init(
            method: method, path: components?.percentEncodedPath ?? target, query: query, headers: headers, body: body)
    }
}

/// A body of `length` bytes produced on demand: `read(position, buffer)`
/// fills the buffer with the bytes from `position` and returns how many,
/// or nil when storage failed (the connection is then closed mid-body).
package final class ResponseBodyReader: Sendable {
    package let length: Int64
    let read: @Sendable (Int64, UnsafeMutableRawBufferPointer) -> Int?
    let finished: @Sendable () -> Void

    package init(
        length: Int64, read: @escaping @Sendable (Int64, UnsafeMutableRawBufferPointer) -> Int?,
        finished: @escaping @Sendable () -> Void = {}
    ) {
        self.length = length
        self.read = read
        self.finished = finished
    }
}

/// The answer to a request.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [String: String]
    public var body: [UInt8]
    /// The authenticated user, for the request log (never the token).
    public var user: String?
    /// Why a 5xx was answered (the underlying error), for the request log only.
    package var cause: String?
    /// An answer to HEAD: the `Content-Length` the GET would have, with no body.
    package var declaredLength: Int64?
    /// A body read from storage block by block as the socket takes it
    /// (instead of `body`): a blob of 50 MiB is never whole in memory.
    package var bodyReader: ResponseBodyReader?

    public init(status: Int, headers: [String: String] = [:], body: [UInt8] = [], user: String? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.user = user
    }

    /// A JSON answer. Never to be kept by a cache on the way or on the
    /// device: every answer is one person's data, or an error about it.
    static func json(_ status: Int, _ body: [UInt8], user: String? = nil) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: ["Content-Type": "application/json", "Cache-Control": "no-store"], body: body, user: user)
    }
}
