import Foundation
import OutpostCore

extension SyncServer {
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

    /// `GET /v1/pull?…&wait=N` on a socket (N > 0): answered at once when
    /// there is something after the cursor, else parked until a commit or
    /// the wait ends.
    func longPoll(_ request: RouteRequest, seconds: Int) throws -> LiveAnswer {
        let http = request.http
        let principal = try request.caller()
        let (collections, pull) = try livePull(http)
        // Registered before the first read: a commit after that read wakes it.
        let connection = try liveHub.open(
            kind: .longPoll, interest: interest(principal, collections, http), token: Authentication.bearer(http),
            wait: .seconds(seconds), changesPending: false)
        let first: PullService.Page
        do {
            first = try PullService(database: feed.source(), config: config, clock: clock, primary: feed.primary).page(pull, as: principal)
        } catch {
            liveHub.close(connection)
            throw error
        }
        guard first.changes == 0 else {
            liveHub.close(connection)
            return .now(pageAnswer(first, to: principal))
        }
        if first.heldBack { liveHub.recheck(connection) }
        return .wait(LongPoll(connection: connection, server: self, request: http))
    }

    /// What a woken long poll's read again says.
    enum LongPollRead {
        /// Nothing after its cursor yet, with time left on its wait: it waits on.
        case waitOn
        /// The page that answers it (read here, not read again).
        case answer(HTTPResponse)
        /// Answered the usual way: its wait ran out, or the read failed (the answer says why).
        case asUsual
    }

    /// Reads the page after a woken long poll's cursor. Nothing there, with
    /// time left, and it waits on; a page still held back is read again in a
    /// moment (the transaction it waits for may roll back, and nothing else
    /// would wake it).
    func longPollRead(_ http: HTTPRequest, _ connection: LiveConnection) -> LongPollRead {
        let principal = connection.interest.principal
        guard LiveHub.now() < connection.deadline, let (_, pull) = try? livePull(http),
            let page = try? PullService(database: feed.source(), config: config, clock: clock, primary: feed.primary)
                .page(pull, as: principal)
        else { return .asUsual }
        guard page.changes == 0 else { return .answer(pageAnswer(page, to: principal)) }
        if page.heldBack { liveHub.recheck(connection) }
        return .waitOn
    }

    /// A long poll's answer with changes, counted as pulled.
    private func pageAnswer(_ page: PullService.Page, to principal: Principal) -> HTTPResponse {
        metrics.pulled(records: page.changes)
        return .json(200, page.body, user: principal.user)
    }

    /// `GET /v1/stream`: the changes after the cursor as server-sent events, on a socket.
    func stream(_ request: RouteRequest) throws -> LiveAnswer {
        // In process nothing can carry a stream.
        guard request.canWait else { throw APIError(.notFound, "There is no such endpoint.") }
        let http = request.http
        let principal = try request.caller()
        let (collections, pull) = try livePull(http)
        let connection = try liveHub.open(
            kind: .stream, interest: interest(principal, collections, http), token: Authentication.bearer(http), wait: .zero,
            changesPending: false)
        // The first page is read here, so a bad cursor or a needed
        // resync is a plain error answer, not a stream that ends at once.
        do {
            let first = try PullService(database: feed.source(), config: config, clock: clock, primary: feed.primary).page(pull, as: principal)
            return .stream(
                LiveStream(
                    connection: connection, server: self, pull: pull, first: first,
                    format: AnswerCompression.negotiate(http.headers["accept-encoding"])))
        } catch {
            liveHub.close(connection)
            throw error
        }
    }

    /// The collections a live request follows and the pull that reads its pages.
    private func livePull(_ request: HTTPRequest) throws -> (Set<String>, PullService.Request) {
        let collections = try liveCollections(request)
        let pull = PullService.Request(
            collections: Array(collections), cursor: request.query["cursor"], limit: try Self.limitArgument(request),
            windowStart: request.query["window_start"])
        return (collections, pull)
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
            while true {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    if !poll.park({}, resume: { continuation.resume() }) { continuation.resume() }
                }
                if let answer = poll.answerIfDue() { return answer }
            }
        case .stream(let stream):
            stream.finished()
            return Self.errorResponse(APIError(.notFound, "Streams need a socket: use a long poll in process."), user: nil)
        }
    }
}
