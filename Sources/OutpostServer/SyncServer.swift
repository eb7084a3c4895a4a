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
    /// How each device's outbox stands, from its own reports (`/metrics`).
    let outboxes = DeviceOutboxes()
    /// Gives versions to rows of the app's own tables written by others;
    /// nil when the configuration maps none.
    package let ownTables: OwnTableSequencer?

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
        // Servers starting together take turns: the one that waits behind
        // another's migration (longer than a request's lock wait) tries
        // again instead of failing to start.
        try Self.retryingWhileBusy { try ServerSchema.migrate(database) }
        // The app's own tables are read from the catalog before anything is
        // served: a table Outpost cannot sync stops the start.
        var config = config
        var mapped: [String: MappedTable] = [:]
        if !config.tableMappings.isEmpty {
            try Self.retryingWhileBusy { mapped = try OwnTables.resolve(config, in: database) }
            config = try OwnTables.serving(config, tables: mapped)
            try Self.retryingWhileBusy { try OwnTables.install(mapped, in: database) }
        }
        self.config = config
        self.clock = clock
        let jwt = config.jwt.map { settings in
            JWTVerifier(settings, clock: clock, log: { ServerLog.warning($0) })
        }
        jwt?.start()
        self.tokens = TokenStore(database: database, clock: clock, jwt: jwt)
        self.limiter = config.rateLimit.map { RateLimiter($0, clock: clock) }
        self.liveHub = LiveHub(settings: LiveHub.Settings(
            heartbeat: .seconds(config.heartbeatSeconds), maxStreamDuration: .seconds(config.maxStreamSeconds),
            tokenRecheck: config.liveTokenRecheck, maxPerUser: config.connections.livePerUser))
        let hub = liveHub
        let sequencer =
            mapped.isEmpty
            ? nil
            : OwnTableSequencer(
                database: database, tables: mapped, clock: clock, origin: hub.origin,
                log: { ServerLog.warning($0) }, committed: { hub.committed($0) })
        self.ownTables = sequencer
        try Self.retryingWhileBusy { try FeedVersions.keepAhead(database) }
        try Self.retryingWhileBusy { try CatalogSeed.seedIfEmpty(database, config: config, clock: clock) }
        try Self.retryingWhileBusy { try runMaintenance() }
        // Commits of the other servers on this database wake this one's waiting connections.
        let listener = database.listenForCommits(log: { ServerLog.warning($0) }) { payload in
            // A row of an app's table written by someone else: sequence it.
            if payload == OwnTableSQL.notePayload {
                sequencer?.wake()
                return
            }
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
        if config.sequencesInBackground { sequencer?.start() }
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
    /// `encodeAhead`: the coding the download's requests accept; a page
    /// built ahead is compressed in it there, so its request only sends bytes.
    func pullPage(_ pull: PullService.Request, as principal: Principal, encodeAhead: DeflateFormat? = nil) throws -> PullService.Page {
        // What the cursor's scope tag is a hash of: one caller's scope.
        let scope = "\(principal.role.rawValue)|\(principal.team)|\(principal.user)"
        let key: @Sendable (String?) -> PagesAhead.Key = { [pull] cursor in
            PagesAhead.Key(
                scope: scope, collections: pull.collections, limit: pull.limit, windowStart: pull.windowStart, own: pull.own,
                cursor: cursor)
        }
        // The database is chosen (and counted in the metrics) only for a page read now.
        let page =
            try (config.buildsPagesAhead ? pagesAhead.take(key(pull.cursor)) : nil)
            ?? PullService(database: feed.source(), config: config, clock: clock, primary: feed.primary).page(pull, as: principal, holdWait: config.feedHoldWait)
        guard config.buildsPagesAhead, page.hasMore, !page.heldBack else { return page }
        Self.buildAhead(
            pull, after: page.cursor, as: principal, pages: 2, encodeAhead: encodeAhead, key: key, pagesAhead: pagesAhead, feed: feed,
            config: config, clock: clock)
        return page
    }

    /// Builds the page after `cursor` ahead, and once it is read (before
    /// it is compressed), the page after that one, `pages` in all. Built
    /// one after another, each page's compression (30 ms for 5,000 records
    /// at level 4) held the next read back, and the download's next
    /// request, asked for on the headers, waited for both.
    private static func buildAhead(
        _ pull: PullService.Request, after cursor: String, as principal: Principal, pages: Int, encodeAhead: DeflateFormat?,
        key: @escaping @Sendable (String?) -> PagesAhead.Key, pagesAhead: PagesAhead, feed: FeedReader, config: ServerConfig,
        clock: any WallClock
    ) {
        var next = pull
        next.cursor = cursor
        pagesAhead.build(key(cursor)) { [next] in
            var page = try PullService(database: feed.source(), config: config, clock: clock, primary: feed.primary).page(next, as: principal)
            if pages > 1, page.hasMore, !page.heldBack {
                buildAhead(
                    pull, after: page.cursor, as: principal, pages: pages - 1, encodeAhead: encodeAhead, key: key,
                    pagesAhead: pagesAhead, feed: feed, config: config, clock: clock)
            }
            if let format = encodeAhead, page.body.count >= AnswerCompression.minimumBytes,
                let body = AnswerCompression.compress(page.body, as: format)
            {
                page.encoded = (format, body)
            }
            return page
        }
    }

    /// Removes tombstones past the horizon and old push results.
    public func runMaintenance() throws {
        try Maintenance(database: database, config: config, clock: clock, blobs: blobs).run()
    }

    deinit {
        commitListener.current?.stop()
        ownTables?.stop()
    }

    /// Writes the device sightings noted since the last time (the HTTP
    /// server's timer calls this every few seconds). A busy database keeps
    /// them for the next round.
    /// Reads the configured JWKS again (SIGHUP): nil when tokens are not
    /// JWTs, else whether keys were loaded (on failure the known ones stay).
    public func reloadSigningKeys() -> Bool? { tokens.jwt?.reload() }

    func writeSightings() { try? sightings.write(to: database) }

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

    /// `cause` is for the server's log only (the request log line of a 5xx), never the answer.
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
}

extension SyncServer {
    /// The newest version of the change feed the server has handed out:
    /// a device's cursor past it stands past the end of the feed.
    package func newestFeedVersion() throws -> Int64 {
        try database.read { try FeedWatermark.read($0).end - 1 }
    }
}
