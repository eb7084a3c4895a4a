import Foundation
public import OutpostCore

/// The sync server's request handling, independent of how requests arrive:
/// `HTTPServer` feeds it from libmicrohttpd, tests and the simulation call
/// `handle` directly.
public final class SyncServer: Sendable {
    public let database: any ServerDatabase
    public let config: ServerConfig
    public let tokens: TokenStore
    let clock: any WallClock
    /// Fault and delay injection for tests.
    let hooks = ServerHooks()
    /// Per-user request budget, when the configuration sets one.
    let limiter: RateLimiter?
    /// The long polls and streams waiting on this process.
    let liveHub: LiveHub
    /// Hears the other servers' commits (PostgreSQL); stopped with the server.
    let commitListener = Locked<(any CommitListening)?>(nil)
    /// Counters and histograms for `GET /metrics`.
    package let metrics: ServerMetrics
    /// Where pull pages are read: the primary, or the read replica when fresh.
    let feed: FeedReader
    /// Download pages built while the page before them travels.
    let pagesAhead = PagesAhead()
    /// Attachments' bytes (`/v1/blobs`).
    let blobs: BlobStore
    /// When each device was last heard from (the console's devices page).
    let sightings = DeviceSightings()

    /// Opens the server over a database: migrates it, seeds the catalogs and
    /// runs housekeeping once.
    /// `readDatabase`: a streaming replica of `database` (PostgreSQL) that
    /// pull pages are read from whenever it has replayed the newest commit
    /// this server heard of (see `FeedReader`).
    public init(
        database: any ServerDatabase, readDatabase: (any ServerDatabase)? = nil, config: ServerConfig,
        clock: any WallClock = SystemWallClock()
    ) throws {
        let metrics = ServerMetrics()
        self.metrics = metrics
        // Beside a SQLite file its blobs are files; on PostgreSQL they are rows every server reads.
        let blobFolder = (database as? SQLiteServerDatabase).map { $0.path + ".blobs" }
        let database = MeteredDatabase(database, metrics: metrics)
        self.blobs = BlobStore(database: database, folder: blobFolder)
        self.database = database
        let feed = FeedReader(
            primary: database, replica: readDatabase.map { MeteredDatabase($0, metrics: metrics) }, metrics: metrics)
        self.feed = feed
        self.config = config
        self.clock = clock
        let jwt = config.jwt.map { settings in
            JWTVerifier(settings, clock: clock, log: { FileHandle.standardError.write(Data(($0 + "\n").utf8)) })
        }
        jwt?.start()
        self.tokens = TokenStore(database: database, clock: clock, jwt: jwt)
        self.limiter = config.rateLimit.map { RateLimiter($0, clock: clock) }
        self.liveHub = LiveHub(settings: LiveHub.Settings(
            heartbeat: .seconds(config.heartbeatSeconds), maxStreamDuration: .seconds(config.maxStreamSeconds),
            tokenRecheck: config.liveTokenRecheck))
        // Servers starting together take turns: the one that waits behind
        // another's migration (longer than a request's lock wait) tries
        // again instead of failing to start.
        try Self.retryingWhileBusy { try ServerSchema.migrate(database) }
        try Self.retryingWhileBusy { try FeedVersions.keepAhead(database) }
        try Self.retryingWhileBusy { try CatalogSeed.seedIfEmpty(database, config: config, clock: clock) }
        try Self.retryingWhileBusy { try runMaintenance() }
        // Commits of the other servers on this database wake this one's waiting connections.
        let hub = liveHub
        let listener = database.listenForCommits(log: { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }) { payload in
            if let notice = CommitNotice(payload: payload, ignoringOrigin: hub.origin) { hub.committed(notice) }
        }
        commitListener.withLock { $0 = listener }
        // A page built ahead before a commit may lack it; a device that
        // pushed and then pulls must see its write (and a replica-fed page
        // must not be older than a commit this server heard of).
        let pagesAhead = self.pagesAhead
        liveHub.setCommitHandler {
            feed.committed()
            pagesAhead.dropAll()
        }
        let revocations = RevocationWatch(database: database, clock: clock)
        // Weakly: the hub keeps this handler, and a strong reference back
        // kept every hub (its timer ticking, its database read every tick)
        // alive after its server was gone.
        liveHub.setTickHandler { [weak liveHub] _ in
            guard let liveHub else { return }
            // A token revoked by any process (the CLI, another server) ends its streams within a second.
            let revoked = revocations.recentlyRevoked()
            if !revoked.isEmpty { liveHub.close(tokens: revoked, with: Self.authError(.revoked)) }
        }
    }

    /// Runs a start-up step again while the database says "busy", for up to a minute.
    static func retryingWhileBusy(_ step: () throws -> Void) throws {
        let deadline = Date().addingTimeInterval(60)
        while true {
            do {
                return try step()
            } catch let error as DatabaseError where error.kind == .transient && Date() < deadline {
                Thread.sleep(forTimeInterval: 0.2)
            }
        }
    }

    /// A pull's page: the one built ahead for it, if there is one; and when
    /// the page is full, the page after it is built ahead in turn.
    private func pullPage(_ pull: PullService.Request, as principal: Principal) throws -> PullService.Page {
        // What the cursor's scope tag is a hash of: one caller's scope.
        let scope = "\(principal.role.rawValue)|\(principal.team)|\(principal.user)"
        func key(_ cursor: String?) -> PagesAhead.Key {
            PagesAhead.Key(
                scope: scope, collections: pull.collections, limit: pull.limit, windowStart: pull.windowStart, own: pull.own,
                cursor: cursor)
        }
        // The database is chosen (and counted in the metrics) only for a page read now.
        let page =
            try (config.buildsPagesAhead ? pagesAhead.take(key(pull.cursor)) : nil)
            ?? PullService(database: feed.source(), config: config, clock: clock, primary: feed.primary).page(pull, as: principal, holdWait: config.feedHoldWait)
        guard config.buildsPagesAhead, page.hasMore, !page.heldBack else { return page }
        var next = pull
        next.cursor = page.cursor
        pagesAhead.build(key(page.cursor)) { [feed, config, clock, next] in
            try PullService(database: feed.source(), config: config, clock: clock, primary: feed.primary).page(next, as: principal)
        }
        return page
    }

    /// Removes tombstones past the horizon and old push results.
    public func runMaintenance() throws {
        try Maintenance(database: database, config: config, clock: clock, blobs: blobs).run()
    }

    deinit { commitListener.current?.stop() }

    /// Writes the device sightings noted since the last time (the HTTP
    /// server's timer calls this every few seconds). A busy database keeps
    /// them for the next round.
    func writeSightings() { try? sightings.write(to: database) }

    /// Answers one request. Never throws: every failure becomes the JSON error body.
    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        var user: String?
        var answer: HTTPResponse
        do {
            answer = try route(request, user: &user)
        } catch {
            answer = Self.errorAnswer(error, user: user)
        }
        // The request codings this server reads, so a client can compress
        // what it sends next (and knows to send plain when none is listed).
        if !Self.acceptEncoding.isEmpty { answer.headers["Accept-Encoding"] = Self.acceptEncoding }
        return answer
    }

    static let acceptEncoding = BodyCompression.acceptedEncodings.joined(separator: ", ")

    /// The body as sent, or inflated when it came with a `Content-Encoding`
    /// this server reads: the size limit holds for what it inflates to, and
    /// a broken stream changes nothing.
    static func decodedBody(_ request: HTTPRequest, limit: Int) throws -> Data {
        guard let encoding = request.headers["content-encoding"]?.trimmingCharacters(in: .whitespaces).lowercased(),
            encoding != "identity"
        else { return request.body }
        guard BodyCompression.acceptedEncodings.contains(encoding) else {
            throw APIError(
                .unsupportedEncoding,
                "The body's Content-Encoding '\(encoding)' is not one this server reads; "
                    + (BodyCompression.isAvailable ? "send it as deflate, gzip or plain." : "send it plain."))
        }
        do {
            return try BodyCompression.inflate(request.body, limit: limit)
        } catch .tooLarge {
            throw APIError(.payloadTooLarge, "The request body inflates to more than \(limit / 1_048_576) MiB.")
        } catch {
            throw APIError(.invalidRequest, "The request body is not a whole \(encoding) stream.")
        }
    }

    /// The JSON error answer for anything a request's handling threw.
    static func errorAnswer(_ error: any Error, user: String?) -> HTTPResponse {
        switch error {
        case let error as APIError:
            return errorResponse(error, user: user, cause: error.status >= 500 ? error.body.message : nil)
        case let error as DatabaseError where error.kind == .transient:
            return errorResponse(.unavailable, user: user, cause: error.logDescription)
        case let error as TokenStore.Failure:
            return errorResponse(authError(error), user: user)
        default:
            // A bug or a broken database, never bad input: say so without details.
            return errorResponse(
                APIError(.unavailable, "The server could not finish this request. Please try again shortly.", retryAfter: 5),
                user: user, cause: (error as? DatabaseError)?.logDescription ?? String(describing: error))
        }
    }

    /// An app whose data schema the server no longer accepts gets 426
    /// before anything is read or applied: its outbox waits for the update.
    func checkSchema(_ request: HTTPRequest) throws {
        guard let minimum = config.minSchema else { return }
        let declared = request.headers["outpost-schema"].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard let declared, declared >= minimum else {
            let seen = declared.map { "schema \($0)" } ?? "no schema"
            throw APIError(
                .upgradeRequired,
                "This version of the app (\(seen)) is too old for this server, which needs schema \(minimum) or newer. Update the app; your changes are kept on the device.")
        }
    }

    /// `cause` is for the server's log only (the request log line of a 5xx), never the answer.
    /// The request's `limit` argument, if given; not a number is 400.
    static func limitArgument(_ request: HTTPRequest) throws -> Int? {
        guard let text = request.query["limit"] else { return nil }
        guard let value = Int(text) else {
            throw APIError(.invalidRequest, "The limit must be a number.", fields: ["limit": "must be a number"])
        }
        return value
    }

    /// `client_id` and `own_through` of a pull, given together: the
    /// caller's own writes it already holds (`PullService.OwnWrites`).
    static func ownWritesArgument(_ request: HTTPRequest) throws -> PullService.OwnWrites? {
        let client = request.query["client_id"]
        let through = request.query["own_through"]
        guard client != nil || through != nil else { return nil }
        guard let client, let id = UUID.fromWire(client) else {
            throw APIError(
                .invalidRequest, "client_id must be the device's client id (a UUID) when own_through is given.",
                fields: ["client_id": "must be a UUID"])
        }
        guard let through, let seq = Int64(through), seq >= 0 else {
            throw APIError(
                .invalidRequest, "own_through must be a whole number from 0 when client_id is given.",
                fields: ["own_through": "must be a whole number from 0"])
        }
        return PullService.OwnWrites(client: id.wireText, through: seq)
    }

    /// A request body as `T`: nesting bounded first, then strict decoding,
    /// a failure answered 400 naming the field.
    /// `fast` reads the body without Codable where it can; nil sends it
    /// through the decoder, whose errors name the field at fault.
    static func decodeJSON<T: Decodable>(_ type: T.Type, from body: Data, fast: (Data) -> T? = { _ in nil }) throws -> T {
        try RequestGuard.check(body)
        if let value = fast(body) { return value }
        do {
            return try WireCoding.decode(type, from: body)
        } catch let error as WireError {
            throw APIError.invalid(error)
        }
    }

    static func errorResponse(_ error: APIError, user: String?, cause: String? = nil) -> HTTPResponse {
        var response = HTTPResponse.json(error.status, Array((try? WireCoding.encode(error.body)) ?? Data()), user: user)
        if let retryAfter = error.retryAfter { response.headers["Retry-After"] = String(retryAfter) }
        response.cause = cause
        return response
    }

    static func authError(_ failure: TokenStore.Failure) -> APIError {
        switch failure {
        case .missing: return APIError(.unauthenticated, "Sign in to continue: this request carries no token.")
        case .unknown: return APIError(.unauthenticated, "Sign in again: this token is not known.")
        case .expired: return APIError(.tokenExpired, "Your session has expired. Sign in again; nothing on the device is lost.")
        case .revoked: return APIError(.tokenRevoked, "This device's access was withdrawn. Ask your coordinator.")
        case .refused(let why): return APIError(.unauthenticated, "Sign in again: this token was refused (\(why)).")
        }
    }

    private func route(_ request: HTTPRequest, user: inout String?) throws -> HTTPResponse {
        if request.path == "/metrics" { return try metricsAnswer(request) }
        if request.path == "/admin" || request.path.hasPrefix("/admin/") { return consoleAnswer(request) }
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 3, parts[0] == "", parts[1] == "v1" else {
            throw APIError(.notFound, "There is no such endpoint.")
        }
        let route = Array(parts.dropFirst(2))
        // Probes (health, readiness) come from load balancers, not apps.
        if route != ["health"] && route != ["ready"] { try checkSchema(request) }

        func require(_ method: String) throws {
            guard request.method == method else {
                throw APIError(.methodNotAllowed, "This endpoint only answers \(method).")
            }
        }
        func authenticate() throws -> Principal {
            let header = request.headers["authorization"]
            var token: String?
            if let header {
                guard header.hasPrefix("Bearer ") else {
                    throw APIError(.unauthenticated, "Sign in to continue: the Authorization header must be 'Bearer <token>'.")
                }
                token = String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
            }
            let principal = try tokens.authenticate(token)
            user = principal.user
            sightings.note(request, user: principal.user, at: ServerTimestamp(clock.now()))
            try limiter?.admit(principal.user)
            return principal
        }
        func json<T: Encodable>(_ value: T) throws -> HTTPResponse {
            .json(200, Array(try WireCoding.encode(value)), user: user)
        }
        func limitArgument() throws -> Int? { try Self.limitArgument(request) }
        func decodeBody<T: Decodable>(_ type: T.Type, fast: (Data) -> T? = { _ in nil }) throws -> T {
            if let contentType = request.headers["content-type"], !contentType.lowercased().hasPrefix("application/json") {
                throw APIError(.invalidRequest, "Send the body as application/json.")
            }
            guard request.body.count <= config.maxBodyBytes else {
                throw APIError(.payloadTooLarge, "The request body is larger than \(config.maxBodyBytes / 1_048_576) MiB.")
            }
            return try Self.decodeJSON(type, from: try Self.decodedBody(request, limit: config.maxBodyBytes), fast: fast)
        }

        switch route {
        case ["health"]:
            try require("GET")
            return try json(HealthResponse(serverTime: ServerTimestamp(clock.now()), limits: limits))
        case ["ready"]:
            try require("GET")
            return readiness()
        case ["push"]:
            try require("POST")
            let principal = try authenticate()
            let body = try decodeBody(PushRequest.self) { PushRequest.readWire([UInt8]($0)) }
            let answer = try PushService(database: database, config: config, clock: clock, hooks: hooks, hub: liveHub)
                .push(body, as: principal, caller: CallerVersion(request))
            metrics.mutations(answer.statuses)
            return .json(200, answer.body, user: user)
        case ["pull"]:
            try require("GET")
            let principal = try authenticate()
            let limit = try limitArgument()
            let pull = PullService.Request(
                collections: request.query["collections"].map { $0.split(separator: ",").map(String.init) },
                cursor: request.query["cursor"], limit: limit, windowStart: request.query["window_start"],
                own: try Self.ownWritesArgument(request))
            let page = try pullPage(pull, as: principal)
            metrics.pulled(records: page.changes)
            return .json(200, page.body, user: user)
        case ["scope"]:
            try require("GET")
            let principal = try authenticate()
            return try json(try ReadService(database: database, config: config).scope(
                    of: principal, windowStart: request.query["window_start"]))
        case ["search"]:
            try require("GET")
            let principal = try authenticate()
            let limit = try limitArgument()
            return try json(
                try ReadService(database: database, config: config).search(
                    collection: request.query["collection"], query: request.query["q"], limit: limit, as: principal))
        case let path where path.count == 2 && path[0] == "blobs":
            return try blobAnswer(request, user: &user)
        case let path where path.count == 2 && path[0] == "mutations":
            try require("GET")
            let principal = try authenticate()
            return try json(try ReadService(database: database, config: config).mutation(path[1], as: principal))
        case let path where path.count == 3 && path[0] == "records":
            try require("GET")
            let principal = try authenticate()
            return try json(try ReadService(database: database, config: config).record(path[1], path[2], as: principal))
        case let path where path.count == 4 && path[0] == "records" && path[3] == "assign":
            try require("POST")
            let principal = try authenticate()
            let assignment = try decodeBody(AssignService.Assignment.self)
            return try json(
                try AssignService(database: database, config: config, clock: clock, hub: liveHub).assign(
                    path[1], path[2], assignment, as: principal))
        default:
            throw APIError(.notFound, "There is no such endpoint.")
        }
    }
}

extension SyncServer {
    /// The newest version of the change feed the server has handed out:
    /// a device's cursor past it stands past the end of the feed (I10).
    package func newestFeedVersion() throws -> Int64 {
        try database.read { try FeedWatermark.read($0).end - 1 }
    }
}
