public import OutpostCore

/// An error answer: HTTP status, the protocol's error body, and for "not now"
/// answers the seconds to wait. Renders itself as the JSON error body.
public struct APIError: Error, Sendable, Equatable {
    public var status: Int
    public var body: ErrorBody
    public var retryAfter: Int?

    public init(_ code: ErrorCode, _ message: String, fields: [String: String]? = nil, retryAfter: Int? = nil) {
        self.status = code.httpStatus
        self.body = ErrorBody(code: code, message: message, fields: fields)
        self.retryAfter = retryAfter ?? ((code == .rateLimited || code == .unavailable) ? 1 : nil)
    }

    static func invalid(_ error: WireError) -> APIError {
        if error.path.isEmpty && error.problem == "is not valid JSON" {
            return APIError(.invalidJSON, "The request body is not valid JSON.")
        }
        if error.path.isEmpty {
            return APIError(.invalidRequest, error.description)
        }
        return APIError(.invalidRequest, error.description, fields: [error.path: error.problem])
    }

    static let unavailable = APIError(.unavailable, "The server is busy for a moment. Please try again shortly.", retryAfter: 2)
}
