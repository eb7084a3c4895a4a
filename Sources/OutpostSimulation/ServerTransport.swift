import Foundation
public import Outpost
import OutpostCore
public import OutpostServer

/// Hands requests to the real server's request handling in process: the
/// whole protocol without a socket. The simulation's network wraps it.
///
/// The server behind it can lose its power and start again (a new
/// `SyncServer` on what its disk kept): every device's link then reaches
/// the new one. While it is down a request is refused before it is sent;
/// one the server was handling when the power went gets no answer.
public struct ServerTransport: SyncTransport {
    private let slot: Slot

    /// The server running now.
    public var server: SyncServer { slot.current.server }

    public init(server: SyncServer, disk: FaultyDisk? = nil) { slot = Slot(server, disk: disk) }

    /// The server started again after a power loss: requests go to `server` from now on.
    public func restarted(as server: SyncServer) { slot.replace(server) }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        let (server, disk) = slot.current
        if disk?.isPoweredOff == true { throw TransportError.notSent("the server is down (it lost its power)") }
        let answer = server.handle(Self.httpRequest(request))
        // The power went while the server handled it: whatever it answered never left.
        if disk?.isPoweredOff == true { throw TransportError.noAnswer("the server lost its power before answering") }
        return TransportResponse(status: answer.status, headers: answer.headers, body: Data(answer.body))
    }

    /// How the server answers `request` over a socket: at once, or as a stream.
    func answer(_ request: TransportRequest) -> LiveAnswer {
        let (server, disk) = slot.current
        if disk?.isPoweredOff == true {
            return .now(HTTPResponse(status: 503, headers: ["Retry-After": "1"], body: Array(#"{"error":"unavailable","message":"The server is down."}"#.utf8)))
        }
        return server.answer(Self.httpRequest(request))
    }

    static func httpRequest(_ request: TransportRequest) -> HTTPRequest {
        HTTPRequest(method: request.method, target: request.target, headers: request.headers, body: request.body ?? Data())
    }

    private final class Slot: @unchecked Sendable {
        // @unchecked Sendable: `server` is read and replaced under `lock`.
        private let lock = NSLock()
        private var server: SyncServer
        let disk: FaultyDisk?

        init(_ server: SyncServer, disk: FaultyDisk?) {
            self.server = server
            self.disk = disk
        }

        var current: (server: SyncServer, disk: FaultyDisk?) { lock.withLock { (server, disk) } }

        func replace(_ server: SyncServer) { lock.withLock { self.server = server } }
    }
}
