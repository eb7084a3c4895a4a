import Foundation
import OutpostCore

/// What a route does with a request that passed its middleware.
enum RouteAction: Sendable {
    typealias Respond = @Sendable (SyncServer) -> (RouteRequest) throws -> HTTPResponse
    typealias Live = @Sendable (SyncServer) -> (RouteRequest) throws -> LiveAnswer
    typealias Upload = @Sendable (SyncServer) -> (RouteRequest) throws -> BlobUpload.Start

    /// Answers at once, from the whole body.
    case respond(Respond)
    /// May wait for changes (a long poll) or stream them, on a socket.
    case live(Live)
    /// Checks the headers before any of the body is read; the body then
    /// goes to the upload as it arrives.
    case upload(Upload)
}
