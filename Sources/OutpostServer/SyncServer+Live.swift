import Foundation
import OutpostCore

extension SyncServer {
    /// Answers a request over a real socket: like ``handle(_:)``, except
    /// that a long poll (`GET /v1/pull?…&wait=N`) with nothing to send
    /// waits, and `GET /v1/stream` becomes a stream of events.
    public func answer(_ request: HTTPRequest) -> LiveAnswer {
        guard request.method == "GET" else { return .now(handle(request)) }
        switch request.path {
        case "/v1/stream": return stream(request)
        case "/v1/pull" where request.query["wait"] != nil: return longPoll(request)
        default: return .now(handle(request))
        }
    }

    /// Ends every waiting connection with `unavailable` and a Retry-After
    /// (graceful shutdown), then waits up to `grace` for them to go.
    public func closeLiveConnections(grace: Duration = .seconds(2)) {
        liveHub.closeAll(with: APIError(
            .unavailable, "The server is restarting. Your device reconnects by itself in a moment.", retryAfter: 2))
        let deadline = ContinuousClock.now + grace
        while liveHub.count > 0 && ContinuousClock.now < deadline { usleep(10_000) }
    }

    /// Waiting connections now (long polls and streams).
    public var liveConnections: Int { liveHub.count }

    /// Page reads the live channels saved by sharing one read between
    /// connections of the same scope and position.
    package var sharedLivePages: Int { liveHub.sharedPageHits }

    private func longPoll(_ request: HTTPRequest) -> LiveAnswer {
        guard let text = request.query["wait"], let seconds = Int(text), (0...Self.maxWait).contains(seconds) else {
            return .now(Self.errorResponse(
                APIError(.invalidRequest, "wait must be a number of seconds from 0 to \(Self.maxWait).",
                         fields: ["wait": "must be 0 to \(Self.maxWait)"]), user: nil))
        }
        guard seconds > 0 else { return .now(handle(request)) }
        return liveRequest(request) { principal, collections, pull in
            // Registered before the first read: a commit after that read wakes it.
            guard let connection = liveHub.open(
                kind: .longPoll, interest: interest(principal, collections, request), token: Self.bearer(request),
                wait: .seconds(seconds), changesPending: false)
            else { throw APIError.unavailable }
            let first: PullService.Page
            do {
                first = try PullService(database: feed.source(), config: config, clock: clock, primary: feed.primary).page(pull, as: principal)
            } catch {
                liveHub.close(connection)
                throw error
            }
            guard first.changes == 0 else {
                liveHub.close(connection)
                metrics.pulled(records: first.changes)
                return .now(.json(200, first.body, user: principal.user))
            }
            if first.heldBack { liveHub.recheck(connection) }
            return .wait(LongPoll(connection: connection, server: self, request: request))
        }
    }

    private func stream(_ request: HTTPRequest) -> LiveAnswer {
        liveRequest(request) { principal, collections, pull in
            guard let connection = liveHub.open(
                kind: .stream, interest: interest(principal, collections, request), token: Self.bearer(request), wait: .zero,
                changesPending: false)
            else { throw APIError.unavailable }
            // The first page is read here, so a bad cursor or a needed
            // resync is a plain error answer, not a stream that ends at once.
            do {
                let first = try PullService(database: feed.source(), config: config, clock: clock, primary: feed.primary).page(pull, as: principal)
                return .stream(LiveStream(connection: connection, server: self, pull: pull, first: first))
            } catch {
                liveHub.close(connection)
                throw error
            }
        }
    }

    /// What a long poll and a stream check first, once (the schema, the
    /// token, the rate limit, the collections and the pull's arguments),
    /// and the same error answers a pull gives when a check fails.
    private func liveRequest(
        _ request: HTTPRequest, _ answer: (Principal, Set<String>, PullService.Request) throws -> LiveAnswer
    ) -> LiveAnswer {
        var user: String?
        do {
            try checkSchema(request)
            let principal = try tokens.authenticate(Self.bearer(request))
            user = principal.user
            try limiter?.admit(principal.user)
            let collections = try liveCollections(request)
            let pull = PullService.Request(
                collections: Array(collections), cursor: request.query["cursor"], limit: try Self.limitArgument(request),
                windowStart: request.query["window_start"])
            return try answer(principal, collections, pull)
        } catch let error as APIError {
            return .now(Self.errorResponse(error, user: user))
        } catch let failure as TokenStore.Failure {
            return .now(Self.errorResponse(Self.authError(failure), user: user))
        } catch {
            return .now(Self.errorResponse(APIError.unavailable, user: user, cause: String(describing: error)))
        }
    }

    static let maxWait = 60

    private func interest(_ principal: Principal, _ collections: Set<String>, _ request: HTTPRequest) -> LiveInterest {
        LiveInterest(
            principal: principal, collections: collections, readOnly: Set(config.readOnlyCollections),
            device: DeviceSightings.device(request))
    }

    /// The collections a live request follows: the ones it names, or all.
    private func liveCollections(_ request: HTTPRequest) throws -> Set<String> {
        guard let names = request.query["collections"], !names.isEmpty else { return Set(config.collections.keys) }
        let requested = Set(names.split(separator: ",").map(String.init))
        let unknown = requested.filter { config.collections[$0] == nil }.sorted()
        guard unknown.isEmpty else {
            throw APIError(
                .invalidRequest, "Unknown collection: \(unknown.joined(separator: ", ")).",
                fields: ["collections": "names unknown collections: \(unknown.joined(separator: ", "))"])
        }
        return requested
    }

    static func bearer(_ request: HTTPRequest) -> String? {
        guard let header = request.headers["authorization"], header.hasPrefix("Bearer ") else { return nil }
        return String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
    }
}

extension SyncServer {
    /// Answers a request in process (tests, the simulation): a long poll
    /// waits, without a thread, until it is woken; a stream is refused,
    /// since nothing here can carry one.
    public func respond(_ request: HTTPRequest) async -> HTTPResponse {
        switch answer(request) {
        case .now(let response):
            return response
        case .wait(let poll):
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                if !poll.park({}, resume: { continuation.resume() }) { continuation.resume() }
            }
            return poll.respond()
        case .stream(let stream):
            stream.finished()
            return Self.errorResponse(APIError(.notFound, "Streams need a socket: use a long poll in process."), user: nil)
        }
    }
}
