import Foundation
import OutpostCore

/// The administrator's console at `/admin`: its page, style and script,
/// compiled into the server (no CDN, nothing fetched), and the JSON API
/// under `/admin/api/` that the script calls with the session cookie.
/// Routes and middleware (security headers, session, CSRF) are in
/// `Routing/Routes.swift`.
extension SyncServer {
    var consoleSessions: ConsoleSessions { ConsoleSessions(database: database, tokens: tokens, clock: clock) }

    /// The console's page, style and script.
    func consoleAsset(_ request: RouteRequest) throws -> HTTPResponse {
        guard let asset = ConsoleAssets.asset(request.http.path) else {
            throw APIError(.notFound, "There is no such console page.")
        }
        return HTTPResponse(
            status: 200, headers: ["Content-Type": asset.contentType, "Cache-Control": "no-cache"],
            body: request.http.method == "HEAD" ? [] : asset.bytes)
    }

    /// Signing in makes a new session whatever cookie came along (no fixation).
    func consoleSignIn(_ request: RouteRequest) throws -> HTTPResponse {
        try ConsoleChangeCheck.sameOrigin(request.http)
        struct SignIn: Decodable { var token: String }
        let body = try consoleBody(SignIn.self, request.http)
        let sessions = consoleSessions
        if let cookie = ConsoleSessions.cookie(in: request.http.headers["cookie"]) { try? sessions.end(cookie: cookie) }
        let (value, session) = try sessions.signIn(token: body.token)
        var response = try Self.consoleJSON(try sessionAnswer(session), user: session.user)
        response.headers["Set-Cookie"] = ConsoleSessions.cookieHeader(value, secure: request.http.overTLS)
        return response
    }

    func consoleSession(_ request: RouteRequest) throws -> HTTPResponse {
        let session = try consoleSessions.session(cookie: ConsoleSessions.cookie(in: request.http.headers["cookie"]))
        return try Self.consoleJSON(try sessionAnswer(session), user: session.user)
    }

    func consoleSignOut(_ request: RouteRequest) throws -> HTTPResponse {
        let sessions = consoleSessions
        let cookie = ConsoleSessions.cookie(in: request.http.headers["cookie"])
        let session = try sessions.session(cookie: cookie)
        guard let sent = request.http.headers["x-csrf-token"], ConsoleChangeCheck.constantTimeEqual(sent, session.csrf) else {
            return Self.errorResponse(ConsoleChangeCheck.noCSRF, user: session.user)
        }
        if let cookie { try sessions.end(cookie: cookie) }
        var response = try Self.consoleJSON(["signed_out": true], user: session.user)
        response.headers["Set-Cookie"] = ConsoleSessions.cookieHeader(nil, secure: request.http.overTLS)
        return response
    }

    func consoleRecords(_ request: RouteRequest) throws -> HTTPResponse {
        try Self.consoleJSON(
            try ConsoleRecords(database: database, config: config).search(
                ConsoleRecords.Filter(request.http.query, config: config)),
            user: request.user)
    }

    func consoleRecord(_ request: RouteRequest) throws -> HTTPResponse {
        try Self.consoleJSON(
            try ConsoleRecords(database: database, config: config).record(
                request.parameter("collection"), request.parameter("id")),
            user: request.user)
    }

    func consoleAssign(_ request: RouteRequest) throws -> HTTPResponse {
        let session = try request.session()
        let admin = Principal(user: session.user, role: .admin, team: "")
        let assignment = try consoleBody(AssignService.Assignment.self, request.http)
        let record = try AssignService(database: database, config: config, clock: clock, hub: liveHub, via: "console")
            .assign(request.parameter("collection"), request.parameter("id"), assignment, as: admin)
        return try Self.consoleJSON(
            [
                "uuid": .string(record.uuid.wireText), "owner": .string(record.owner), "team": .string(record.team),
                "version": .int(record.version),
            ], user: request.user)
    }

    func consoleDevices(_ request: RouteRequest) throws -> HTTPResponse {
        try sightings.write(to: database)
        return try Self.consoleJSON(
            try ConsoleDevices(database: database, config: config, connected: liveHub.connectedDevices, now: clock.now())
                .list(request.http.query),
            user: request.user)
    }

    func consoleProblems(_ request: RouteRequest) throws -> HTTPResponse {
        try Self.consoleJSON(try ConsoleProblems.list(request.http.query, database: database), user: request.user)
    }

    func consoleTokens(_ request: RouteRequest) throws -> HTTPResponse {
        try Self.consoleJSON(
            try ConsoleTokens(tokens: tokens, database: database, clock: clock).list(request.http.query), user: request.user)
    }

    func consoleIssueToken(_ request: RouteRequest) throws -> HTTPResponse {
        let issue = try consoleBody(ConsoleTokens.Issue.self, request.http)
        return try Self.consoleJSON(
            try ConsoleTokens(tokens: tokens, database: database, clock: clock).issue(issue), user: request.user)
    }

    func consoleRevokeToken(_ request: RouteRequest) throws -> HTTPResponse {
        try Self.consoleJSON(
            try ConsoleTokens(tokens: tokens, database: database, clock: clock).revoke(id: request.parameter("id")),
            user: request.user)
    }

    func consoleActivity(_ request: RouteRequest) throws -> HTTPResponse {
        // The activity log counts on the process's own clock, as the metrics do.
        var report = metrics.activity.report(now: Date()).objectValue ?? [:]
        let (longPolls, streams) = liveHub.counts
        report["live"] = ["streams": .int(Int64(streams)), "long_polls": .int(Int64(longPolls))]
        return try Self.consoleJSON(.object(report), user: request.user)
    }

    /// The console API's answer for a path it does not know.
    func noSuchConsoleEndpoint(_ request: RouteRequest) throws -> HTTPResponse {
        throw APIError(.notFound, "There is no such console endpoint.")
    }

    /// Who is signed in, the CSRF token the script sends back, and what can be searched.
    private func sessionAnswer(_ session: ConsoleSessions.Session) throws -> JSONValue {
        let counts = try database.read { sql in
            try sql.query("SELECT collection, COUNT(*) FROM records WHERE deleted = 0 GROUP BY collection", [])
        }
        var byName: [String: Int64] = [:]
        for row in counts { byName[row.string(0)] = row.int(1) }
        let collections: [JSONValue] = config.collections.values.sorted { $0.name < $1.name }.map { schema in
            [
                "name": .string(schema.name), "count": .int(byName[schema.name] ?? 0),
                "window_field": .text(schema.windowField), "read_only": .bool(schema.readOnly),
                "fields": .array(schema.fields.keys.sorted().map { .string($0) }),
            ]
        }
        return [
            "user": .string(session.user), "csrf": .string(session.csrf), "expires_at": .string(session.expiresAt),
            "collections": .array(collections),
        ]
    }

    private func consoleBody<T: Decodable>(_ type: T.Type, _ request: HTTPRequest) throws -> T {
        // JSON only: a cross-site form cannot send it without the browser asking first.
        guard request.headers["content-type"]?.lowercased().hasPrefix("application/json") == true else {
            throw APIError(.invalidRequest, "Send the body as application/json.")
        }
        guard request.body.count <= 65_536 else {
            throw APIError(.payloadTooLarge, "A console request body is at most 64 KiB.")
        }
        return try Self.decodeJSON(type, from: try Self.decodedBody(request, limit: 65_536))
    }

    /// An attached photo for the record page: raster images only (an SVG
    /// could carry script), never sniffed as anything else.
    func consoleThumbnail(_ route: RouteRequest) throws -> HTTPResponse {
        let (sha, request, user) = (route.parameter("sha256"), route.http, route.user)
        guard AttachedFile.isBlobName(sha) else {
            throw APIError(.invalidRequest, "A blob is named by 64 hexadecimal digits.", fields: ["sha256": "must be 64 hex digits"])
        }
        let images = ["image/jpeg", "image/png", "image/gif", "image/webp"]
        guard let state = try blobs.state(sha), state.complete, let type = state.contentType, images.contains(type) else {
            throw APIError(.notFound, "No such image.")
        }
        var response = HTTPResponse(
            status: 200, headers: ["Content-Type": type, "Cache-Control": "private, max-age=3600", "Content-Disposition": "inline"],
            user: user)
        if request.fromSocket, let reader = blobs.bodyReader(sha, first: 0, length: state.size) {
            response.bodyReader = reader
            return response
        }
        try blobs.read(sha, from: 0, to: state.size) { response.body.append(contentsOf: $0) }
        return response
    }
}
