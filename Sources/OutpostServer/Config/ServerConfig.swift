public import Foundation
public import OutpostCore

/// What `outpost serve` serves: the collections and the server's limits.
///
/// Read from a JSON file (`--config`) or the built-in default:
/// `{"collections": [CollectionSchema…], "tombstone_horizon_days": 90}`;
/// a file's collections are added to the default ones.
public struct ServerConfig: Sendable {
    public var collections: [String: CollectionSchema]
    /// Collections that are tables of the app's own PostgreSQL database, by
    /// name. Their schemas join `collections` when the server starts and
    /// reads the tables' columns (`mappedTables`).
    public var tableMappings: [String: TableMapping] = [:]
    /// The mapped tables as read from the database at start (set by the
    /// server, never by the configuration file).
    package var mappedTables: [String: MappedTable] = [:]
    /// Rows of mapped tables written by others are sequenced by a thread of
    /// the server's own. Off in the deterministic simulation, which runs
    /// the sequencer (`SyncServer.ownTables`) at moments its seed chooses.
    package var sequencesInBackground = true
    /// How long tombstones are kept; older pull cursors get 410.
    public var tombstoneHorizon: TimeInterval
    /// How long push results are kept for duplicates and `GET /v1/mutations/{id}`.
    public var resultRetention: TimeInterval
    /// Largest request body accepted.
    public var maxBodyBytes: Int
    public var maxPullLimit: Int
    public var defaultPullLimit: Int
    public var maxSearchLimit: Int
    /// Requests per user before 429 `rate_limited`; nil: no limit.
    public var rateLimit: RateLimit?
    /// How long a PostgreSQL statement may wait for a lock, and run, before it is
    /// given up as 503 `unavailable`.
    public var databaseTimeouts = DatabaseTimeouts()
    /// How many sockets the HTTP server holds, per client address and in all.
    public var connections = ConnectionLimits()
    /// The lowest app data schema (`Outpost-Schema`) still accepted; older
    /// or undeclared ones get 426 `upgrade_required`. Nil accepts any.
    public var minSchema: Int?
    /// A live stream sends a heartbeat at least this often (seconds), so a
    /// client notices a dead socket within two.
    public var heartbeatSeconds = 15
    /// A live stream is closed after this long (seconds); the client
    /// reconnects from its cursor.
    public var maxStreamSeconds = 300
    /// How long a stream trusts the token it last checked before checking
    /// it again (a revocation ends the stream within this). The simulation
    /// sets zero, so what a stream sends never depends on real time.
    package var liveTokenRecheck: Duration = .seconds(1)
    /// How long a pull waits for changes held back by the feed's watermark
    /// (PostgreSQL: a transaction that may commit below them still runs)
    /// before it answers without them. Concurrent writes end within
    /// milliseconds; tests that share one PostgreSQL with transactions held
    /// open on purpose wait longer.
    public var feedHoldWait: Duration = .milliseconds(250)
    /// When a pull answers a full page, the page after it is built at once
    /// (see `PagesAhead`), so a download's next request finds it ready.
    /// Off in the deterministic simulation, whose pages must not depend on
    /// when a background thread ran.
    public var buildsPagesAhead = true
    /// `GET /metrics` answers without a token (for a private network where
    /// only Prometheus reaches the port). Off: an admin token or
    /// `metricsToken` is needed.
    public var metricsPublic = false
    /// A token that opens `GET /metrics` only, for the scraper (so it
    /// needs no admin token); nil: admin tokens only.
    public var metricsToken: String?
    /// The largest attachment (blob) accepted, in bytes: 50 MiB unless set.
    public var maxBlobBytes = 50 * 1_048_576
    /// How long a blob no live record names is kept after it was last
    /// touched (uploaded to, or completed): 7 days unless set.
    public var blobGrace: TimeInterval = 7 * 86_400
    /// JWTs from the app's identity provider, beside the server's own
    /// opaque tokens; nil: opaque tokens only.
    public var jwt: JWTSettings?

    /// A token bucket per user: `burst` requests at once, refilled at `perMinute`.
    public struct RateLimit: Sendable, Equatable {
        public var perMinute: Int
        public var burst: Int

        public init(perMinute: Int, burst: Int) throws {
            guard perMinute > 0, burst > 0 else { throw ConfigError("a rate limit needs positive requests per minute and burst") }
            self.perMinute = perMinute
            self.burst = burst
        }
    }

    public init(
        collections: [CollectionSchema] = DefaultCollections.all, tables: [TableMapping] = [],
        tombstoneHorizon: TimeInterval = 90 * 86_400, resultRetention: TimeInterval = 30 * 86_400
    ) throws {
        var byName: [String: CollectionSchema] = [:]
        for schema in collections {
            guard byName[schema.name] == nil else {
                throw ConfigError("the collection '\(schema.name)' is defined twice")
            }
            byName[schema.name] = schema
        }
        var mappings: [String: TableMapping] = [:]
        for mapping in tables {
            guard byName[mapping.name] == nil, mappings[mapping.name] == nil else {
                throw ConfigError("the collection '\(mapping.name)' is defined twice")
            }
            if let other = mappings.values.first(where: { $0.qualifiedName == mapping.qualifiedName }) {
                throw ConfigError(
                    "the collections '\(other.name)' and '\(mapping.name)' both map the table \(mapping.qualifiedName)")
            }
            mappings[mapping.name] = mapping
        }
        for schema in collections {
            for (field, target) in schema.references where byName[target] == nil && mappings[target] == nil {
                throw ConfigError("the field '\(schema.name).\(field)' references the unknown collection '\(target)'")
            }
            for field in schema.fields.keys where !CollectionSchema.isValidName(field) {
                throw ConfigError("the field name '\(schema.name).\(field)' must be lowercase letters, digits and _")
            }
            if let window = schema.windowField, schema.fields[window]?.type != .timestamp {
                throw ConfigError("the window field '\(schema.name).\(window)' must be a timestamp")
            }
        }
        guard tombstoneHorizon > 0 else { throw ConfigError("the tombstone horizon must be positive") }
        self.collections = byName
        self.tableMappings = mappings
        self.tombstoneHorizon = tombstoneHorizon
        self.resultRetention = resultRetention
        self.maxBodyBytes = 4 * 1024 * 1024
        self.maxPullLimit = 5000
        self.defaultPullLimit = 1000
        self.maxSearchLimit = 200
    }

    /// Loads a JSON configuration file.
    public static func load(path: String) throws -> ServerConfig {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigError("cannot read the configuration file \(path)")
        }
        struct File: Decodable {
            /// Added to the defaults; none given serves the defaults alone.
            var collections: [CollectionEntry]?
            var tombstoneHorizonDays: Double?
            var rateLimitPerMinute: Int?
            var rateLimitBurst: Int?
            var lockTimeoutSeconds: Double?
            var statementTimeoutSeconds: Double?
            var connectionLimit: Int?
            var connectionsPerAddress: Int?
            var idleTimeoutSeconds: Int?
            var maxLivePerUser: Int?
            var minSchema: Int?
            var heartbeatSeconds: Int?
            var maxStreamSeconds: Int?
            var maxBlobMiB: Int?
            var blobGraceDays: Double?
            var jwt: JWTFile?
            struct JWTFile: Decodable {
                var jwks: String
                var issuer: String
                var audience: String
                var roleClaim: String?
                var teamClaim: String?
                var leewaySeconds: Double?
                enum CodingKeys: String, CodingKey, CaseIterable {
                    case jwks, issuer, audience
                    case roleClaim = "role_claim"
                    case teamClaim = "team_claim"
                    case leewaySeconds = "leeway_seconds"
                }
            }
            enum CodingKeys: String, CodingKey, CaseIterable {
                case jwt
                case collections
                case tombstoneHorizonDays = "tombstone_horizon_days"
                case rateLimitPerMinute = "rate_limit_per_minute"
                case rateLimitBurst = "rate_limit_burst"
                case lockTimeoutSeconds = "lock_timeout_seconds"
                case statementTimeoutSeconds = "statement_timeout_seconds"
                case connectionLimit = "connection_limit"
                case connectionsPerAddress = "connections_per_address"
                case idleTimeoutSeconds = "idle_timeout_seconds"
                case maxLivePerUser = "max_live_per_user"
                case minSchema = "min_schema"
                case heartbeatSeconds = "heartbeat_seconds"
                case maxStreamSeconds = "max_stream_seconds"
                case maxBlobMiB = "max_blob_mib"
                case blobGraceDays = "blob_grace_days"
            }
        }
        do {
            guard let document = try? JSONValue.parse(String(decoding: data, as: UTF8.self)) else {
                throw ConfigError("the configuration file \(path) is not valid JSON")
            }
            do {
                try ConfigKeys.check(
                    document, topLevel: Set(File.CodingKeys.allCases.map(\.rawValue)),
                    jwt: Set(File.JWTFile.CodingKeys.allCases.map(\.rawValue)))
            } catch let error as ConfigError {
                throw ConfigError("the configuration file \(path): \(error.description)")
            }
            let file = try WireCoding.decode(File.self, from: data)
            var schemas: [CollectionSchema] = []
            var tables: [TableMapping] = []
            for entry in file.collections ?? [] {
                switch entry {
                case .records(let schema): schemas.append(schema)
                case .table(let mapping): tables.append(mapping)
                }
            }
            // The file's collections are added to the defaults (one of the
            // same name replaces it): devices and the CLI always find the
            // read-only catalogs beside the app's own collections.
            let named = Set(schemas.map(\.name) + tables.map(\.name))
            schemas = DefaultCollections.all.filter { !named.contains($0.name) } + schemas
            var config = try ServerConfig(
                collections: schemas, tables: tables, tombstoneHorizon: (file.tombstoneHorizonDays ?? 90) * 86_400)
            if let perMinute = file.rateLimitPerMinute {
                config.rateLimit = try RateLimit(perMinute: perMinute, burst: file.rateLimitBurst ?? max(1, perMinute / 6))
            }
            config.databaseTimeouts = try DatabaseTimeouts(
                lock: file.lockTimeoutSeconds ?? config.databaseTimeouts.lock,
                statement: file.statementTimeoutSeconds ?? config.databaseTimeouts.statement)
            config.connections = try ConnectionLimits(
                total: file.connectionLimit ?? config.connections.total,
                perAddress: file.connectionsPerAddress ?? config.connections.perAddress,
                idleTimeoutSeconds: file.idleTimeoutSeconds ?? config.connections.idleTimeoutSeconds,
                livePerUser: file.maxLivePerUser ?? config.connections.livePerUser)
            config.minSchema = file.minSchema
            if let seconds = file.heartbeatSeconds {
                guard (1...300).contains(seconds) else { throw ConfigError("heartbeat_seconds must be 1 to 300") }
                config.heartbeatSeconds = seconds
            }
            if let seconds = file.maxStreamSeconds {
                guard seconds >= 10 else { throw ConfigError("max_stream_seconds must be at least 10") }
                config.maxStreamSeconds = seconds
            }
            if let mib = file.maxBlobMiB {
                guard (1...4_096).contains(mib) else { throw ConfigError("max_blob_mib must be 1 to 4096") }
                config.maxBlobBytes = mib * 1_048_576
            }
            if let days = file.blobGraceDays {
                guard days > 0, days <= 3_650 else { throw ConfigError("blob_grace_days must be more than 0 and at most 3650") }
                config.blobGrace = days * 86_400
            }
            if let jwt = file.jwt {
                var settings = JWTSettings(jwks: jwt.jwks, issuer: jwt.issuer, audience: jwt.audience)
                if let claim = jwt.roleClaim { settings.roleClaim = claim }
                if let claim = jwt.teamClaim { settings.teamClaim = claim }
                if let leeway = jwt.leewaySeconds {
                    guard (0...600).contains(leeway) else { throw ConfigError("jwt.leeway_seconds must be 0 to 600") }
                    settings.leeway = leeway
                }
                config.jwt = settings
            }
            return config
        } catch let error as WireError {
            throw ConfigError("the configuration file \(path) is not valid: \(error)")
        }
    }

    public var readOnlyCollections: [String] { collections.values.filter(\.readOnly).map(\.name).sorted() }
}

/// A configuration that cannot be served.
public struct ConfigError: Error, Sendable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
