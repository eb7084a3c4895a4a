import Foundation

/// A protocol error code. Known codes have constants; a code the client does
/// not know yet still decodes, so a newer server never breaks an older client.
public struct ErrorCode: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// A code from its wire text, e.g. `ErrorCode("invalid_field")`.
    public init(_ rawValue: String) { self.rawValue = rawValue }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }

    /// 400: the body is not valid JSON. Nothing was applied, and resending cannot help (a client bug).
    public static let invalidJSON = ErrorCode("invalid_json")
    /// 400: the body or query breaks a protocol rule. Nothing was applied, and resending the same request cannot help.
    public static let invalidRequest = ErrorCode("invalid_request")
    /// 401: the token is missing or unknown. Capture keeps working offline; ask the person to sign in again.
    public static let unauthenticated = ErrorCode("unauthenticated")
    /// 401: the token is past its expiry. Ask the person to sign in again; nothing on the device is lost.
    public static let tokenExpired = ErrorCode("token_expired")
    /// 403: this device's access was withdrawn. Warn about unsent changes, then wipe local data.
    public static let tokenRevoked = ErrorCode("token_revoked")
    /// 403: the role lacks this right (for example, writing a read-only collection).
    public static let forbidden = ErrorCode("forbidden")
    /// 404: the record, mutation or path does not exist; for a record, it may also be outside the caller's scope.
    public static let notFound = ErrorCode("not_found")
    /// 405: the request used the wrong HTTP method (a client bug).
    public static let methodNotAllowed = ErrorCode("method_not_allowed")
    /// 410: the pull cursor is too old or the caller's scope changed. Download the scope again, keeping the outbox.
    public static let resyncRequired = ErrorCode("resync_required")
    /// 413: the body is over the size limit or holds too many mutations. Send smaller batches.
    public static let payloadTooLarge = ErrorCode("payload_too_large")
    /// 415: the body is sent in a `Content-Encoding` the server does not read
    /// (its answer's `Accept-Encoding` lists those it does). Send it plain.
    public static let unsupportedEncoding = ErrorCode("unsupported_encoding")
    /// 429: over the user's request budget. Wait at least `Retry-After` seconds, then try again.
    public static let rateLimited = ErrorCode("rate_limited")
    /// 503: the server is overloaded or briefly failing. Wait at least `Retry-After` seconds, then try again.
    public static let unavailable = ErrorCode("unavailable")
    /// Seqs the server used for other mutations: a restored or cloned device.
    public static let clientBehind = ErrorCode("client_behind")
    /// The app's declared data schema is older than the server accepts.
    public static let upgradeRequired = ErrorCode("upgrade_required")
    /// Answers the server's HTTP layer gives before a request reaches the sync logic.
    public static let uriTooLong = ErrorCode("uri_too_long")
    /// 431: the request headers do not fit the server's memory for a connection. Nothing was applied (a client bug).
    public static let headersTooLarge = ErrorCode("headers_too_large")
    /// 500: the server's HTTP layer could not read the request. Wait and retry, as for `unavailable`.
    public static let internalError = ErrorCode("internal_error")
    /// 505: the request was not HTTP/1.0 or 1.1 (a client bug).
    public static let httpVersionNotSupported = ErrorCode("http_version_not_supported")
    /// 422: a completed blob upload's bytes do not hash to the blob's name; the upload was dropped.
    public static let hashMismatch = ErrorCode("hash_mismatch")
    /// 409: a blob upload's `Content-Range` does not start where the server's copy ends
    /// (`Upload-Offset` says where); nothing of it was stored.
    public static let uploadOffsetMismatch = ErrorCode("upload_offset_mismatch")

    /// The HTTP status docs/protocol.md pairs with each known code.
    public var httpStatus: Int {
        switch self {
        case .invalidJSON, .invalidRequest: return 400
        case .unauthenticated, .tokenExpired: return 401
        case .tokenRevoked, .forbidden: return 403
        case .notFound: return 404
        case .methodNotAllowed: return 405
        case .clientBehind, .uploadOffsetMismatch: return 409
        case .resyncRequired: return 410
        case .payloadTooLarge: return 413
        case .uriTooLong: return 414
        case .unsupportedEncoding: return 415
        case .rateLimited: return 429
        case .upgradeRequired: return 426
        case .headersTooLarge: return 431
        case .hashMismatch: return 422
        case .internalError: return 500
        case .unavailable: return 503
        case .httpVersionNotSupported: return 505
        default: return 400
        }
    }
}

/// The body of every non-2xx response:
/// `{"error": {"code": …, "message": …, "fields": {…}}}`.
public struct ErrorBody: Sendable, Equatable, Codable, Error {
    /// What went wrong, for programs: branch on this, never on `message`.
    public var code: ErrorCode
    /// One plain sentence for a person.
    public var message: String
    /// The fields at fault, with what is wrong with each.
    public var fields: [String: String]?
    /// With `client_behind`: the server's last seq for this client, and the
    /// seqs of the request it holds other (or no longer known) mutations for.
    public var lastSeq: Int64?
    /// With `client_behind`: the seqs of the request the server holds other (or no longer known) mutations for.
    public var seqs: [Int64]?
    /// The id of the request this answered (`X-Request-Id`), set by the
    /// server's HTTP layer: quote it when reporting the error.
    public var requestID: String?

    /// An error body made from its parts.
    public init(code: ErrorCode, message: String, fields: [String: String]? = nil, lastSeq: Int64? = nil, seqs: [Int64]? = nil) {
        self.code = code
        self.message = message
        self.fields = fields
        self.lastSeq = lastSeq
        self.seqs = seqs
    }

    public init(from decoder: any Decoder) throws {
        let outer = try decoder.container(keyedBy: WireKey.self)
        let container = try outer.nestedContainer(keyedBy: WireKey.self, forKey: .error)
        code = try container.decode(ErrorCode.self, forKey: .code)
        message = try container.decode(String.self, forKey: .message)
        fields = try container.decodeIfPresent([String: String].self, forKey: .fields)
        requestID = try container.decodeIfPresent(String.self, forKey: .requestID)
        lastSeq = try outer.decodeIfPresent(Int64.self, forKey: .lastSeq)
        seqs = try outer.decodeIfPresent([Int64].self, forKey: .seqs)
    }

    public func encode(to encoder: any Encoder) throws {
        var outer = encoder.container(keyedBy: WireKey.self)
        var container = outer.nestedContainer(keyedBy: WireKey.self, forKey: .error)
        try container.encode(code, forKey: .code)
        try container.encode(message, forKey: .message)
        try container.encodeIfPresent(fields, forKey: .fields)
        try container.encodeIfPresent(requestID, forKey: .requestID)
        try outer.encodeIfPresent(lastSeq, forKey: .lastSeq)
        try outer.encodeIfPresent(seqs, forKey: .seqs)
    }
}
