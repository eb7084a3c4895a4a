import Foundation
import OutpostCore

/// The sync API's handlers under `/v1` (docs/protocol.md); their routes and
/// middleware are in `Routing/Routes.swift`.
extension SyncServer {
    func health(_ request: RouteRequest) throws -> HTTPResponse {
        try json(HealthResponse(serverTime: ServerTimestamp(clock.now()), limits: limits, version: OutpostVersion.current), user: nil)
    }

    func ready(_ request: RouteRequest) throws -> HTTPResponse { readiness() }

    func push(_ request: RouteRequest) throws -> HTTPResponse {
        let principal = try request.caller()
        let body = try decodeBody(PushRequest.self, request.http) { PushRequest.readWire([UInt8]($0)) }
        let answer = try PushService(database: database, config: config, clock: clock, hooks: hooks, hub: liveHub)
            .push(body, as: principal, caller: CallerVersion(request.http))
        metrics.mutations(answer.statuses)
        return .json(200, answer.body, user: request.user)
    }

    /// A page of the change feed; with `wait` on a socket, a long poll.
    func pull(_ request: RouteRequest) throws -> LiveAnswer {
        let http = request.http
        if request.canWait, let wait = http.query["wait"] {
            guard let seconds = Int(wait), (0...Self.maxWait).contains(seconds) else {
                throw APIError(
                    .invalidRequest, "wait must be a number of seconds from 0 to \(Self.maxWait).",
                    fields: ["wait": "must be 0 to \(Self.maxWait)"])
            }
            if seconds > 0 { return try longPoll(request, seconds: seconds) }
        }
        let limit = try Self.limitArgument(http)
        let pull = PullService.Request(
            collections: http.query["collections"].map { $0.split(separator: ",").map(String.init) },
            cursor: http.query["cursor"], limit: limit, windowStart: http.query["window_start"],
            own: try Self.ownWritesArgument(http))
        // Only a socket's answers are encoded (in process, bodies stay plain).
        let format = http.fromSocket ? AnswerCompression.negotiate(http.headers["accept-encoding"]) : nil
        let page = try pullPage(pull, as: try request.caller(), encodeAhead: format)
        metrics.pulled(records: page.changes)
        var answer = HTTPResponse.json(200, page.body, user: request.user)
        // The next page's cursor ahead of the body: a client may ask for that
        // page while this one's bytes are still arriving.
        if page.hasMore { answer.headers[PullHeaders.nextCursor] = page.cursor }
        if let encoded = page.encoded, encoded.format == format {
            // Compressed where it was built ahead: the HTTP layer sends it as it is.
            answer.body = encoded.body
            answer.headers["Content-Encoding"] = encoded.format.rawValue
            answer.headers["Vary"] = "Accept-Encoding"
        }
        return .now(answer)
    }

    func scope(_ request: RouteRequest) throws -> HTTPResponse {
        try json(
            try ReadService(database: database, config: config).scope(
                of: try request.caller(), windowStart: request.http.query["window_start"]),
            user: request.user)
    }

    /// `GET /v1/collections`: every collection this server syncs, by name,
    /// with its fields as devices see them (a mapped table's read from its columns).
    func collections(_ request: RouteRequest) throws -> HTTPResponse {
        _ = try request.caller()
        return try json(
            CollectionsResponse(collections: config.collections.values.sorted { $0.name < $1.name }), user: request.user)
    }

    func search(_ request: RouteRequest) throws -> HTTPResponse {
        let principal = try request.caller()
        let limit = try Self.limitArgument(request.http)
        return try json(
            try ReadService(database: database, config: config).search(
                collection: request.http.query["collection"], query: request.http.query["q"], limit: limit, as: principal),
            user: request.user)
    }

    func mutation(_ request: RouteRequest) throws -> HTTPResponse {
        try json(
            try ReadService(database: database, config: config).mutation(request.parameter("id"), as: try request.caller()),
            user: request.user)
    }

    func record(_ request: RouteRequest) throws -> HTTPResponse {
        try json(
            try ReadService(database: database, config: config).record(
                request.parameter("collection"), request.parameter("id"), as: try request.caller()),
            user: request.user)
    }

    func assign(_ request: RouteRequest) throws -> HTTPResponse {
        let principal = try request.caller()
        let assignment = try decodeBody(AssignService.Assignment.self, request.http)
        return try json(
            try AssignService(database: database, config: config, clock: clock, hub: liveHub).assign(
                request.parameter("collection"), request.parameter("id"), assignment, as: principal),
            user: request.user)
    }

    private func json<T: Encodable>(_ value: T, user: String?) throws -> HTTPResponse {
        .json(200, Array(try WireCoding.encode(value)), user: user)
    }

    /// A JSON body of at most the configured size (as sent, and inflated).
    private func decodeBody<T: Decodable>(
        _ type: T.Type, _ request: HTTPRequest, fast: (Data) -> T? = { _ in nil }
    ) throws -> T {
        if let contentType = request.headers["content-type"], !contentType.lowercased().hasPrefix("application/json") {
            throw APIError(.invalidRequest, "Send the body as application/json.")
        }
        guard request.body.count <= config.maxBodyBytes else {
            throw APIError(.payloadTooLarge, "The request body is larger than \(config.maxBodyBytes / 1_048_576) MiB.")
        }
        return try Self.decodeJSON(type, from: try Self.decodedBody(request, limit: config.maxBodyBytes), fast: fast)
    }
}
