import Foundation
import OutpostCore

/// Every request, whatever carried it, goes through the route table
/// (`Routes.swift`): its route's middleware, then its handler.
extension SyncServer {
    /// Answers one request at once (tests and the simulation call this;
    /// a long poll answers without waiting). Never throws: every failure
    /// becomes the JSON error body.
    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        switch dispatch(request, canWait: false) {
        case .now(let response):
            return response
        case .wait(let poll):
            // Not asked for in process; answered with what there is now.
            return poll.respond()
        case .stream(let stream):
            stream.finished()
            return Self.errorResponse(APIError(.notFound, "There is no such endpoint."), user: nil)
        }
    }

    /// Answers a request over a real socket: like ``handle(_:)``, except
    /// that a long poll (`GET /v1/pull?…&wait=N`) with nothing to send
    /// waits, and `GET /v1/stream` becomes a stream of events.
    public func answer(_ request: HTTPRequest) -> LiveAnswer {
        dispatch(request, canWait: true)
    }

    /// For the HTTP layer, from a request's headers before its body: the
    /// upload that takes the body as it arrives when the request's route
    /// streams its body, or nil when the body is read whole first.
    /// `head` is only built for such a route.
    func streamedUpload(method: String, path: String, head: () -> HTTPRequest) -> BlobUpload.Start? {
        guard case .found(let route, let parameters) = Router.outpost.resolve(method: method, path: path),
            case .upload(let start) = route.action
        else { return nil }
        var request = RouteRequest(head(), canWait: true)
        request.parameters = parameters
        return startUpload(route, start, &request)
    }

    static let acceptEncoding = BodyCompression.acceptedEncodings.joined(separator: ", ")

    private func dispatch(_ http: HTTPRequest, canWait: Bool) -> LiveAnswer {
        var request = RouteRequest(http, canWait: canWait)
        var middleware: [any Middleware] = []
        var answer: LiveAnswer
        do {
            switch Router.outpost.resolve(method: http.method, path: http.path) {
            case .notFound:
                throw APIError(.notFound, "There is no such endpoint.")
            case .methodNotAllowed(let allowed, let route):
                middleware = route.middleware
                for step in middleware where step.screensRefusals { try step.prepare(&request, server: self) }
                answer = .now(Self.methodNotAllowed(allowed, user: request.user))
            case .found(let route, let parameters):
                middleware = route.middleware
                request.parameters = parameters
                answer = try run(route, &request)
            }
        } catch {
            answer = .now(Self.errorAnswer(error, user: request.user))
        }
        guard case .now(var response) = answer else { return answer }
        for step in middleware.reversed() { step.finish(&response, request: request) }
        // The request codings this server reads, so a client can compress
        // what it sends next (and knows to send plain when none is listed).
        if !Self.acceptEncoding.isEmpty { response.headers["Accept-Encoding"] = Self.acceptEncoding }
        return .now(response)
    }

    /// The route's middleware in order, then its handler.
    private func run(_ route: Router.Route, _ request: inout RouteRequest) throws -> LiveAnswer {
        switch route.action {
        case .respond(let respond):
            for step in route.middleware { try step.prepare(&request, server: self) }
            return .now(try respond(self)(request))
        case .live(let live):
            for step in route.middleware { try step.prepare(&request, server: self) }
            return try live(self)(request)
        case .upload(let start):
            // In process the body is whole already.
            return .now(uploadWhole(route, start, &request))
        }
    }

    /// 405, naming the methods the path answers.
    static func methodNotAllowed(_ allowed: [String], user: String?) -> HTTPResponse {
        let names =
            allowed.count == 1
            ? "only answers \(allowed[0])"
            : "answers \(allowed.dropLast().joined(separator: ", ")) and \(allowed[allowed.count - 1])"
        var response = errorResponse(APIError(.methodNotAllowed, "This endpoint \(names)."), user: user)
        response.headers["Allow"] = allowed.joined(separator: ", ")
        return response
    }

    /// An upload's middleware and header checks; every refusal is counted
    /// in the metrics by its code, as every finished upload is by its result.
    private func startUpload(_ route: Router.Route, _ start: RouteAction.Upload, _ request: inout RouteRequest)
        -> BlobUpload.Start
    {
        let started: BlobUpload.Start
        do {
            for step in route.middleware { try step.prepare(&request, server: self) }
            started = try start(self)(request)
        } catch {
            let response = Self.errorAnswer(error, user: request.user)
            let code = (error as? APIError)?.body.code
                ?? (error as? TokenStore.Failure).map { Self.authError($0).body.code } ?? .unavailable
            started = .refuse(response, code: code)
        }
        switch started {
        case .accept(let upload): upload.metrics = metrics
        case .refuse(_, let code): metrics.blobUpload(code.rawValue)
        }
        return started
    }

    private func uploadWhole(_ route: Router.Route, _ start: RouteAction.Upload, _ request: inout RouteRequest)
        -> HTTPResponse
    {
        switch startUpload(route, start, &request) {
        case .refuse(let response, _):
            return response
        case .accept(let upload):
            request.http.body.withUnsafeBytes { upload.write($0) }
            return upload.finish()
        }
    }

    /// The answer of a group for a path it does not know.
    func noSuchEndpoint(_ request: RouteRequest) throws -> HTTPResponse {
        throw APIError(.notFound, "There is no such endpoint.")
    }
}
