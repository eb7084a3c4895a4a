import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The storage backends every protocol test runs against.
enum Backend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite
    case postgres

    var testDescription: String { rawValue }

    static let postgresURL = ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES_URL"]

    /// SQLite always; PostgreSQL when `scripts/with-postgres` started one
    /// (the README's test command always does).
    static var available: [Backend] { postgresURL == nil ? [.sqlite] : [.sqlite, .postgres] }

    /// A fresh, empty database: a new SQLite file, or a new database in the
    /// test PostgreSQL cluster. A database of its own, not a schema of a
    /// shared one: the change feed's watermark counts every transaction
    /// running in the same database, so a test that holds one open on
    /// purpose would hold back every other test's feed, and a test that
    /// reads the feed without waiting would see pages cut short by another
    /// test's writes. `cluster`: another PostgreSQL cluster's URL than the test cluster's.
    func makeDatabase(
        in directory: TemporaryDirectory, timeouts: DatabaseTimeouts = .sharedTestDatabase, cluster: String? = nil
    ) throws -> (database: any ServerDatabase, location: String) {
        switch self {
        case .sqlite:
            let path = directory.path("server.sqlite")
            return (try SQLiteServerDatabase(path: path), path)
        case .postgres:
            let location = try Self.makePostgresDatabase(in: cluster)
            return (try PostgresDatabase(url: location, poolSize: 4, timeouts: timeouts), location)
        }
    }

    /// Creates an empty database in the test cluster (or in `cluster`); returns its URL.
    static func makePostgresDatabase(in cluster: String? = nil) throws -> String {
        let base = try #require(cluster ?? postgresURL)
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        // CREATE DATABASE cannot run inside a transaction, so not through
        // PostgresDatabase.write.
        let admin = try PostgresConnection(
            url: base, redactedURL: "the test cluster", timeouts: .sharedTestDatabase, failureKind: .failure)
        defer { admin.finish() }
        try admin.command("CREATE DATABASE \(name)")
        var components = try #require(URLComponents(string: base))
        components.path = "/\(name)"
        return try #require(components.string)
    }
}

extension DatabaseTimeouts {
    /// Some tests hold a lock on purpose (a writer that commits last, a
    /// frozen server), and ten tests share two cores: waits are far longer
    /// than in production, so tests allow a minute.
    static let sharedTestDatabase = try! DatabaseTimeouts(lock: 60, statement: 120)
}

extension Duration {
    /// How long a test server's pull waits for changes held back by a
    /// transaction still running in its database. Tests run ten at a time on
    /// two cores, where a writer can be descheduled mid-transaction for
    /// seconds; and some tests hold one open on purpose. Pulls wait for it,
    /// as a production pull would for its own writers.
    static let sharedTestDatabase = Duration.seconds(20)
}

/// A sync server on a real loopback socket (libmicrohttpd), over a fresh
/// database of the chosen backend, with a clock the test controls. The
/// configuration's connection limits apply as in `outpost serve`; the
/// database timeouts are the shared test database's unless a test sets them.
final class LiveServer: @unchecked Sendable {
    // @unchecked Sendable: all stored properties are set once in init.
    let directory: TemporaryDirectory
    let database: any ServerDatabase
    let location: String
    let server: SyncServer
    let http: HTTPServer
    let clock: ManualWallClock
    let base: URL

    init(
        _ backend: Backend, config: ServerConfig? = nil, clock: ManualWallClock = ManualWallClock(Date()),
        databaseTimeouts: DatabaseTimeouts = .sharedTestDatabase, cluster: String? = nil, log: HTTPServer.Log? = nil,
        prepare: ((_ database: any ServerDatabase) throws -> Void)? = nil
    ) throws {
        var config = try config ?? ServerConfig()
        config.feedHoldWait = .sharedTestDatabase
        if config.connections == ConnectionLimits() {
            // A full run on two cores can stall a test's client longer than
            // the ten seconds a connection may idle by default, mid-body or
            // between two requests; tests of idle connections set their own.
            config.connections = try ConnectionLimits(
                total: config.connections.total, perAddress: config.connections.perAddress, idleTimeoutSeconds: 60)
        }
        directory = try TemporaryDirectory(prefix: "outpost-server")
        (database, location) = try backend.makeDatabase(in: directory, timeouts: databaseTimeouts, cluster: cluster)
        // The app's own tables, made before the server that maps them starts.
        try prepare?(database)
        self.clock = clock
        server = try SyncServer(database: database, config: config, clock: clock)
        let server = self.server
        http = try HTTPServer(
            port: 0, threads: 4, maxBodyBytes: config.maxBodyBytes, connections: config.connections, log: log, server: server)
        base = URL(string: "http://127.0.0.1:\(http.port)")!
    }

    /// A second server process on the same PostgreSQL database as `other`
    /// (its own pool, hub and socket), as `outpost serve` run twice.
    /// `readLocation`: a streaming replica the new server reads pull pages from.
    init(sharing other: LiveServer, config: ServerConfig? = nil, readLocation: String? = nil) throws {
        let config = config ?? other.server.config
        directory = try TemporaryDirectory(prefix: "outpost-server")
        location = other.location
        database = try PostgresDatabase(url: location, poolSize: 4, timeouts: .sharedTestDatabase)
        clock = other.clock
        let replica = try readLocation.map { try PostgresDatabase(url: $0, poolSize: 4, timeouts: .sharedTestDatabase) }
        server = try SyncServer(database: database, readDatabase: replica, config: config, clock: clock)
        http = try HTTPServer(
            port: 0, threads: 4, maxBodyBytes: config.maxBodyBytes, connections: config.connections, log: nil, server: server)
        base = URL(string: "http://127.0.0.1:\(http.port)")!
    }

    deinit {
        http.stop()
        server.ownTables?.stop()
        database.close()
    }

    func token(_ user: String, _ role: Role = .field, team: String = "t-1", ttl: TimeInterval? = nil) throws -> String {
        try server.tokens.issue(user: user, role: role, team: team, ttl: ttl)
    }

    struct Response {
        var status: Int
        var body: Data
        var headers: [String: String]

        func decode<T: Decodable>(_ type: T.Type) throws -> T { try WireCoding.decode(type, from: body) }
        var error: ErrorBody? { try? decode(ErrorBody.self) }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    /// Sends one request over the socket.
    func send(
        _ method: String, _ target: String, token: String? = nil, body: Data? = nil,
        contentType: String? = "application/json", headers: [String: String] = [:]
    ) async throws -> Response {
        var request = URLRequest(url: URL(string: target, relativeTo: base)!)
        request.httpMethod = method
        // A long poll is silent until it answers: its wait, plus room for a loaded machine.
        request.timeoutInterval = target.contains("wait=") ? 120 : 30
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let body {
            request.httpBody = body
            if let contentType { request.setValue(contentType, forHTTPHeaderField: "Content-Type") }
        }
        return try await exchange(request)
    }

    private func exchange(_ request: URLRequest) async throws -> Response {
        let session = request.httpMethod == "PUT" ? TestSession.uploads : TestSession.shared
        let (data, response) = try await session.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        var headers: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            if let key = key as? String, let value = value as? String { headers[key.lowercased()] = value }
        }
        return Response(status: http.statusCode, body: data, headers: headers)
    }

    func get(_ target: String, token: String?) async throws -> Response {
        try await send("GET", target, token: token)
    }

    func push(_ request: PushRequest, token: String) async throws -> PushResponse {
        let response = try await send("POST", "/v1/push", token: token, body: try WireCoding.encode(request))
        guard response.status == 200 else {
            Issue.record("push answered \(response.status): \(response.text)")
            throw CancellationError()
        }
        return try response.decode(PushResponse.self)
    }

    /// Pulls until `has_more` is false; returns every change and the last cursor.
    func pullAll(token: String, cursor: PullCursor? = nil, limit: Int = 1000, query extra: String = "") async throws
        -> (changes: [PullChange], cursor: PullCursor?)
    {
        var cursor = cursor
        var changes: [PullChange] = []
        while true {
            var target = "/v1/pull?limit=\(limit)\(extra)"
            if let cursor { target += "&cursor=\(cursor.rawValue)" }
            let response = try await get(target, token: token)
            guard response.status == 200 else {
                Issue.record("pull answered \(response.status): \(response.text)")
                throw CancellationError()
            }
            let page = try response.decode(PullResponse.self)
            changes += page.changes
            cursor = page.cursor
            if !page.hasMore { return (changes, cursor) }
        }
    }
}

/// Builds pushes for one simulated device.
final class TestDevice: @unchecked Sendable {
    // @unchecked Sendable: used from one test task at a time.
    let clientID = UUID()
    var seq: Int64 = 0

    func mutation(
        _ op: MutationOp, _ collection: String = "people", uuid: UUID = UUID(), base: Int64? = nil,
        data: JSONObject? = nil
    ) -> Mutation {
        seq += 1
        return Mutation(seq: seq, id: UUID(), op: op, collection: collection, uuid: uuid, baseVersion: base, data: data)
    }

    func request(_ mutations: Mutation...) -> PushRequest {
        PushRequest(clientID: clientID, mutations: mutations)
    }
}

extension LiveServer {
    /// A server on SQLite with these connection limits and nothing else set.
    static func sqlite(total: Int, perAddress: Int, idleTimeoutSeconds: Int) throws -> LiveServer {
        var config = try ServerConfig()
        config.connections = try ConnectionLimits(total: total, perAddress: perAddress, idleTimeoutSeconds: idleTimeoutSeconds)
        return try LiveServer(.sqlite, config: config)
    }
}
