import Foundation
public import Outpost
public import OutpostServer

/// Hands requests to the real server's request handling in process: the
/// whole protocol without a socket. The simulation's network wraps it.
public struct ServerTransport: SyncTransport {
    public let server: SyncServer

    public init(server: SyncServer) { self.server = server }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        let answer = server.handle(Self.httpRequest(request))
        return TransportResponse(status: answer.status, headers: answer.headers, body: Data(answer.body))
    }

    /// How the server answers `request` over a socket: at once, or as a stream.
    func answer(_ request: TransportRequest) -> LiveAnswer {
        server.answer(Self.httpRequest(request))
    }

    static func httpRequest(_ request: TransportRequest) -> HTTPRequest {
        HTTPRequest(method: request.method, target: request.target, headers: request.headers, body: request.body ?? Data())
    }
}
