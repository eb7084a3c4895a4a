import CMicroHTTPD
import Foundation

/// Between libmicrohttpd's callbacks and the connection gate.
extension HTTPServer {
    /// The gate's record of a connection, kept in its socket context.
    static func gated(_ connection: OpaquePointer) -> GatedConnection? {
        outpost_mhd_socket_context(connection).map { Unmanaged<GatedConnection>.fromOpaque($0).takeUnretainedValue() }
    }

    /// A request's headers arrived: why it must be refused, if it must.
    func admit(_ connection: OpaquePointer) -> ConnectionGate.Refusal? {
        guard let gated = Self.gated(connection) else { return nil }
        return gate.headersArrived(gated, mayPass: Self.carriesTokenAndNoBody(connection))
    }

    /// A request on the connection authenticated.
    func proved(_ connection: OpaquePointer) {
        if let gated = Self.gated(connection) { gate.prove(gated) }
    }

    /// A bearer token and nothing to read after the headers: such a request
    /// is checked at once and cannot hold its slot with a slow body.
    private static func carriesTokenAndNoBody(_ connection: OpaquePointer) -> Bool {
        func header(_ name: String) -> String? {
            MHD_lookup_connection_value(connection, outpost_mhd_header_kind(), name).map { String(cString: $0) }
        }
        guard header("Authorization") != nil, header("Transfer-Encoding") == nil else { return false }
        return (header("Content-Length").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } ?? 0) == 0
    }
}

extension ConnectionGate.Refusal {
    /// The answer's error: `unavailable`, with a wait before trying again.
    var error: APIError {
        switch self {
        case .total:
            APIError(.unavailable, "The server holds as many connections as it may. Your device tries again in a moment.", retryAfter: 10)
        case .address:
            APIError(
                .unavailable,
                "Too many connections from your network have not signed in yet. Your device tries again in a moment.",
                retryAfter: 5)
        }
    }

    /// What the request log says caused it.
    var cause: String {
        switch self {
        case .total: "the server's connection limit is reached"
        case .address: "the address's share of connections not yet authenticated is taken"
        }
    }
}

extension LiveAnswer {
    /// Whether the request authenticated: a live channel always has; an
    /// answer names its user once its token checked out.
    var authenticated: Bool {
        switch self {
        case .now(let response): response.user != nil
        case .wait, .stream: true
        }
    }
}
