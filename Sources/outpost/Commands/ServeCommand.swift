import Dispatch
import Foundation
import OutpostCore
import OutpostServer

/// `outpost serve`: the sync server on a socket until SIGTERM or SIGINT.
enum ServeCommand {
    static let help = """
        Usage: outpost serve [--database PATH|URL] [--read-database URL] [--port N] [--host ADDRESS] [--config FILE] [--threads N]
                             [--rate-limit N] [--lock-timeout S] [--statement-timeout S]
                             [--connection-limit N] [--connections-per-address N] [--max-live-per-user N]
                             [--idle-timeout S]
                             [--write-lock rows|schema] [--feed-hold-ms N] [--max-blob-mib N] [--blob-grace-days N]
                             [--tls-cert FILE --tls-key FILE] [--trusted-proxy ADDRESS]
                             [--metrics-token-file FILE] [--metrics-public]
                             [--jwt-jwks FILE|URL --jwt-issuer ISS --jwt-audience AUD
                              [--jwt-role-claim NAME] [--jwt-team-claim NAME]] [--quiet] [--log-probes]

        Runs the Outpost sync server. With no options it keeps its data in the SQLite file
        \(DatabaseLocation.defaultSQLitePath) in the current folder and needs no set-up.

          --database PATH|URL  a SQLite file, or postgres://user@host:port/db for PostgreSQL
          --read-database URL  PostgreSQL: a streaming replica of --database that pulls are read from
                               whenever it has replayed the newest commit this server heard of (else the
                               primary answers); writes and token checks always go to --database
          --port N             the port to listen on (default 8787; 0 picks a free one)
          --host ADDRESS       the IPv4 address to listen on (default 127.0.0.1)
          --config FILE        a JSON collections configuration (default: people, visits, catalogs)
          --threads N          request threads (default 8)
          --rate-limit N       requests per minute per user, in bursts of N/6, before 429 (default: none;
                               also "rate_limit_per_minute" and "rate_limit_burst" in the configuration)
          --lock-timeout S     PostgreSQL: seconds a statement waits for a lock before the request gets
                               503 (default 5; "lock_timeout_seconds" in the configuration)
          --statement-timeout S
                               PostgreSQL: seconds a statement may run (default 15; "statement_timeout_seconds")
          --connection-limit N open connections in all (default 16384; "connection_limit"); a request
                               past it is answered 503 with Retry-After
          --connections-per-address N
                               connections from one client address that have not yet sent a request
                               with a valid token (default 256; "connections_per_address"). Signed-in
                               devices do not count: any number of phones behind one NAT is served.
                               Past it, the oldest such connection still sending its headers is cut
          --max-live-per-user N
                               streams and long polls one user may hold at once (default 16;
                               "max_live_per_user"); one more is answered 503 with Retry-After
          --idle-timeout S     seconds a connection may stay silent within a request before it is
                               closed (default 10; "idle_timeout_seconds"); after an answer it waits
                               as long for its next request, or at most 2 s once half of a
                               connection limit is taken. A connection not yet signed in has 10 s
                               to send a request's headers, however it trickles them
          --write-lock rows|schema
                               PostgreSQL: how writes of several servers are kept apart. "rows" (the
                               default): row locks only, writes of different users run in parallel and
                               the change feed stays gap-free by a commit watermark. "schema": every
                               write behind one lock (the older design, kept to compare the two)
          --feed-hold-ms N     PostgreSQL: milliseconds a pull waits for changes held back by a
                               transaction still running before it answers without them (default 250)
          --max-blob-mib N     the largest attachment accepted, in MiB (default 50; "max_blob_mib")
          --blob-grace-days N  days an attachment no live record names is kept before housekeeping
                               removes it (default 7; "blob_grace_days")
          --tls-cert FILE      serve HTTPS only, with this PEM certificate chain (libmicrohttpd's GnuTLS);
                               SIGHUP reads it and the key again without closing a connection
          --tls-key FILE       the certificate's PEM private key (unencrypted; keep the file private)
          --trusted-proxy ADDRESS
                               the IPv4 address of a reverse proxy in front of the server: the request
                               log names the client from its X-Forwarded-For instead of the proxy
          --metrics-token-file FILE
                               a file holding a token that opens GET /metrics only (for Prometheus); admin
                               tokens open it too
          --metrics-public     GET /metrics needs no token (only where nothing but the scraper reaches the port)
          --jwt-jwks FILE|URL  also accept JWTs (RS256, ES256) signed by a key of this JWKS, from the app's
                               identity provider; opaque tokens keep working. Needs --jwt-issuer and
                               --jwt-audience; "sub" is the user ("jwt" in the configuration file)
          --jwt-issuer ISS     the "iss" every JWT must carry
          --jwt-audience AUD   an "aud" every JWT must carry
          --jwt-role-claim NAME
                               the claim holding the role: field, coordinator or admin (default "role")
          --jwt-team-claim NAME
                               the claim holding the team (default "team")
          --quiet              no request log on stderr
          --log-probes         also log health checks and metrics scrapes that answered well (left out
                               by default: one every few seconds from each proxy and Prometheus)

        Every line the server logs on stderr is one JSON object: the request log ("request_id",
        "status", "cause" of a 5xx, …) and the server's own lines ("level", "message"); the first
        says the release ("version").

        Stops gracefully on SIGTERM or SIGINT: requests in progress finish first.
        """

    static func run(_ words: [String]) async throws {
        var arguments = try Arguments(words, flagNames: ["quiet", "metrics-public", "log-probes"])
        let location = arguments.option("database") ?? DatabaseLocation.defaultSQLitePath
        let readLocation = arguments.option("read-database")
        let port = try arguments.integer("port", in: 0...65_535) ?? 8787
        let host = arguments.option("host") ?? "127.0.0.1"
        let configPath = arguments.option("config")
        let threads = try arguments.integer("threads", in: 1...256) ?? 8
        let rateLimit = try arguments.integer("rate-limit", in: 1...1_000_000)
        let lockTimeout = try arguments.integer("lock-timeout", in: 1...3600)
        let statementTimeout = try arguments.integer("statement-timeout", in: 1...3600)
        let connectionLimit = try arguments.integer("connection-limit", in: 1...100_000)
        let perAddress = try arguments.integer("connections-per-address", in: 1...100_000)
        let livePerUser = try arguments.integer("max-live-per-user", in: 1...100_000)
        let idleTimeout = try arguments.integer("idle-timeout", in: 1...3600)
        let writeLockName = arguments.option("write-lock") ?? PostgresDatabase.WriteConcurrency.rowLocks.rawValue
        guard let writeLock = PostgresDatabase.WriteConcurrency(rawValue: writeLockName) else {
            throw UsageError("--write-lock must be \"rows\" or \"schema\", not \"\(writeLockName)\".")
        }
        let feedHold = try arguments.integer("feed-hold-ms", in: 0...600_000)
        let maxBlobMiB = try arguments.integer("max-blob-mib", in: 1...4_096)
        let blobGraceDays = try arguments.integer("blob-grace-days", in: 1...3_650)
        let metricsTokenFile = arguments.option("metrics-token-file")
        let metricsPublic = arguments.flag("metrics-public")
        let tlsCertificate = arguments.option("tls-cert")
        let tlsKey = arguments.option("tls-key")
        let trustedProxy = arguments.option("trusted-proxy")
        let jwks = arguments.option("jwt-jwks")
        let issuer = arguments.option("jwt-issuer")
        let audience = arguments.option("jwt-audience")
        let roleClaim = arguments.option("jwt-role-claim")
        let teamClaim = arguments.option("jwt-team-claim")
        let quiet = arguments.flag("quiet")
        let logsProbes = arguments.flag("log-probes")
        try arguments.checkAllUsed()
        guard arguments.positional.isEmpty else { throw UsageError("serve takes no words, only options.") }

        var config: ServerConfig
        do {
            config = try configPath.map(ServerConfig.load(path:)) ?? ServerConfig()
            if let rateLimit { config.rateLimit = try ServerConfig.RateLimit(perMinute: rateLimit, burst: max(1, rateLimit / 6)) }
            config.databaseTimeouts = try DatabaseTimeouts(
                lock: lockTimeout.map(TimeInterval.init) ?? config.databaseTimeouts.lock,
                statement: statementTimeout.map(TimeInterval.init) ?? config.databaseTimeouts.statement)
            config.connections = try ConnectionLimits(
                total: connectionLimit ?? config.connections.total,
                perAddress: perAddress ?? min(config.connections.perAddress, connectionLimit ?? config.connections.total),
                idleTimeoutSeconds: idleTimeout ?? config.connections.idleTimeoutSeconds,
                livePerUser: livePerUser ?? config.connections.livePerUser)
            if let feedHold { config.feedHoldWait = .milliseconds(feedHold) }
            if let maxBlobMiB { config.maxBlobBytes = maxBlobMiB * 1_048_576 }
            if let blobGraceDays { config.blobGrace = TimeInterval(blobGraceDays) * 86_400 }
            config.metricsPublic = metricsPublic || config.metricsPublic
            if jwks != nil || issuer != nil || audience != nil {
                guard let jwks, let issuer, let audience else {
                    throw UsageError("JWTs need all three of --jwt-jwks, --jwt-issuer and --jwt-audience.")
                }
                config.jwt = JWTSettings(jwks: jwks, issuer: issuer, audience: audience)
            }
            if roleClaim != nil || teamClaim != nil {
                guard config.jwt != nil else { throw UsageError("--jwt-role-claim and --jwt-team-claim need --jwt-jwks.") }
                if let roleClaim { config.jwt?.roleClaim = roleClaim }
                if let teamClaim { config.jwt?.teamClaim = teamClaim }
            }
            if let metricsTokenFile {
                guard let text = try? String(contentsOfFile: metricsTokenFile, encoding: .utf8) else {
                    throw UsageError("Cannot read the metrics token file \(metricsTokenFile).")
                }
                let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
                guard token.utf8.count >= 16 else {
                    throw UsageError("The metrics token in \(metricsTokenFile) must be at least 16 characters.")
                }
                config.metricsToken = token
            }
        } catch let error as ConfigError {
            throw UsageError(error.description.prefix(1).uppercased() + error.description.dropFirst() + ".")
        }
        var tls: HTTPServer.TLSFiles?
        if tlsCertificate != nil || tlsKey != nil {
            guard let tlsCertificate, let tlsKey else { throw UsageError("TLS needs both --tls-cert and --tls-key.") }
            tls = HTTPServer.TLSFiles(certificate: tlsCertificate, key: tlsKey)
        }
        if let trustedProxy {
            var address = in_addr()
            guard inet_pton(AF_INET, trustedProxy, &address) == 1 else {
                throw UsageError("--trusted-proxy takes an IPv4 address such as 127.0.0.1, not \"\(trustedProxy)\".")
            }
        }
        if let readLocation, !DatabaseLocation.isPostgres(location) || !DatabaseLocation.isPostgres(readLocation) {
            throw UsageError("--read-database is a PostgreSQL replica of a PostgreSQL --database (postgres://…).")
        }
        // The first line once the arguments are sound says which release
        // this is: during an upgrade two releases run side by side.
        ServerLog.info("Outpost \(OutpostVersion.current) starting.", ["version": OutpostVersion.current])
        let database = try openDatabase(
            location, poolSize: threads, timeouts: config.databaseTimeouts, writeConcurrency: writeLock)
        var readDatabase: (any ServerDatabase)?
        if let readLocation {
            readDatabase = try openDatabase(readLocation, poolSize: threads, timeouts: config.databaseTimeouts)
        }
        let server = try SyncServer(database: database, readDatabase: readDatabase, config: config)
        // Each open connection is a descriptor; room for the limit (and the
        // connections past it that are answered 503), the pool and the files.
        let files = FileDescriptorLimit.raise(toAtLeast: config.connections.filesNeeded(threads: threads))
        let needed = config.connections.total + threads + 256
        if files < needed {
            ServerLog.warning(
                "This system allows \(files) open files; fewer than \(config.connections.total) connections can be held "
                    + "(raise the hard limit, e.g. 'ulimit -Hn \(needed)').")
        }
        let log: HTTPServer.Log? = quiet ? nil : { @Sendable line in FileHandle.standardError.write(Data((line + "\n").utf8)) }
        let http: HTTPServer
        do {
            http = try HTTPServer(
                host: host, port: UInt16(port), threads: threads, maxBodyBytes: config.maxBodyBytes,
                connections: config.connections, log: log, tls: tls, trustedProxy: trustedProxy, server: server)
        } catch let error as ServeError {
            throw CommandFailure(error.description.prefix(1).uppercased() + error.description.dropFirst() + ".")
        }
        http.logsProbes = logsProbes
        let shown = DatabaseLocation.isPostgres(location) ? "PostgreSQL" : location
        let scheme = tls == nil ? "http" : "https"
        ServerLog.info(
            "Outpost server listening on \(scheme)://\(host):\(http.port) (database: \(shown))",
            ["address": "\(scheme)://\(host):\(http.port)", "database": shown])
        // SIGHUP reloads what can change while serving, and never stops the
        // server (a signal left at its default would end the process).
        let servesTLS = tls != nil
        SignalWatcher.shared.onReload {
            var reloaded: [String] = []
            if servesTLS {
                do {
                    try http.reloadCertificate()
                    reloaded.append("the TLS certificate and key (new connections use them)")
                } catch {
                    ServerLog.warning("The TLS certificate was not reloaded (\(error)); the previous one stays in use.")
                }
            }
            if let keys = server.reloadSigningKeys() {
                if keys { reloaded.append("the JWKS") }
            }
            ServerLog.info(
                reloaded.isEmpty
                    ? "Received SIGHUP: nothing to reload (no TLS certificate or JWKS configured); still serving."
                    : "Reloaded " + reloaded.joined(separator: " and ") + ".")
        }
        // Scripts and tests read the port from this line.
        FileHandle.standardOutput.write(Data("listening on port \(http.port)\n".utf8))

        // Housekeeping every hour: tombstones past the horizon, old push results.
        let maintenance = Task.detached {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(3600))
                do { try server.runMaintenance() } catch { ServerLog.warning("Housekeeping failed and will be retried: \(error)") }
            }
        }
        await waitForTermination()
        maintenance.cancel()
        ServerLog.info("Stopping: finishing requests in progress.")
        http.stop()
        database.close()
        readDatabase?.close()
        ServerLog.info("Stopped.")
    }

    static func openDatabase(
        _ location: String, poolSize: Int = 8, timeouts: DatabaseTimeouts = DatabaseTimeouts(),
        writeConcurrency: PostgresDatabase.WriteConcurrency = .rowLocks
    ) throws -> any ServerDatabase {
        do {
            return try DatabaseLocation.open(
                location, poolSize: poolSize, timeouts: timeouts, writeConcurrency: writeConcurrency)
        } catch let error as DatabaseError {
            throw CommandFailure(error.message.prefix(1).uppercased() + error.message.dropFirst())
        }
    }

    /// Suspends until SIGTERM or SIGINT arrives.
    static func waitForTermination() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            SignalWatcher.shared.onTermination { continuation.resume() }
        }
    }
}

/// Turns SIGTERM and SIGINT into one callback, on a dispatch queue (never in
/// a signal handler).
final class SignalWatcher: @unchecked Sendable {
    // @unchecked Sendable: `sources` and `fired` are only touched on `queue`.
    static let shared = SignalWatcher()
    private let queue = DispatchQueue(label: "outpost.signals")
    private var sources: [any DispatchSourceSignal] = []
    private var fired = false

    func onTermination(_ action: @escaping @Sendable () -> Void) {
        queue.sync {
            for signalNumber in [SIGTERM, SIGINT] {
                signal(signalNumber, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
                source.setEventHandler { [weak self] in
                    guard let self, !self.fired else { return }
                    self.fired = true
                    action()
                }
                source.resume()
                sources.append(source)
            }
        }
    }

    /// Calls `action` on every SIGHUP (the conventional "reload").
    func onReload(_ action: @escaping @Sendable () -> Void) {
        queue.sync {
            signal(SIGHUP, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: queue)
            source.setEventHandler { action() }
            source.resume()
            sources.append(source)
        }
    }
}
