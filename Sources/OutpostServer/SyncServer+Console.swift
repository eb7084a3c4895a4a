import Foundation
import OutpostCore

/// The administrator's console at `/admin`: its page, style and script,
/// compiled into the server (no CDN, nothing fetched), and the JSON API
/// under `/admin/api/` that the script calls with the session cookie.
///
/// Every answer carries a strict Content-Security-Policy (scripts and
/// styles only from the server itself, no inline script, no framing), so
/// a record whose data holds `<script>` can only ever be text.
extension SyncServer {
    static let consoleSecurityHeaders = [
        "Content-Security-Policy":
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
            + "form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Cross-Origin-Resource-Policy": "same-origin",
    ]

    var consoleSessions: ConsoleSessions { ConsoleSessions(database: database, tokens: tokens, clock: clock) }

    func consoleAnswer(_ request: HTTPRequest) -> HTTPResponse {
        var user: String?
        var response: HTTPResponse
        do {
            response = try consoleRoute(request, user: &user)
        } catch {
            response = Self.errorAnswer(error, user: user)
        }
        for (name, value) in Self.consoleSecurityHeaders { response.headers[name] = value }
        if response.headers["Cache-Control"] == nil { response.headers["Cache-Control"] = "no-store" }
        return response
    }

    private func consoleRoute(_ request: HTTPRequest, user: inout String?) throws -> HTTPResponse {
        let path = request.path
        guard path.hasPrefix("/admin/api/") else {
            guard request.method == "GET" || request.method == "HEAD" else {
                throw APIError(.methodNotAllowed, "The console's pages only answer GET.")
            }
            guard let asset = ConsoleAssets.asset(path) else { throw APIError(.notFound, "There is no such console page.") }
            return HTTPResponse(
                status: 200, headers: ["Content-Type": asset.contentType, "Cache-Control": "no-cache"],
                body: request.method == "HEAD" ? [] : asset.bytes)
        }
        let route = path.dropFirst("/admin/api/".count).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        let sessions = consoleSessions
        let cookie = ConsoleSessions.cookie(in: request.headers["cookie"])
        let secure = request.overTLS

        if route == ["session"] {
            switch request.method {
            case "POST":
                // Signing in makes a new session whatever cookie came along (no fixation).
                try requireSameOrigin(request)
                struct SignIn: Decodable { var token: String }
                let body = try consoleBody(SignIn.self, request)
                if let cookie { try? sessions.end(cookie: cookie) }
                let (value, session) = try sessions.signIn(token: body.token)
                user = session.user
                var response = try Self.consoleJSON(try sessionAnswer(session), user: user)
                response.headers["Set-Cookie"] = ConsoleSessions.cookieHeader(value, secure: secure)
                return response
            case "GET":
                let session = try sessions.session(cookie: cookie)
                user = session.user
                return try Self.consoleJSON(try sessionAnswer(session), user: user)
            case "DELETE":
                let session = try sessions.session(cookie: cookie)
                user = session.user
                try requireCSRF(request, session)
                if let cookie { try sessions.end(cookie: cookie) }
                var response = try Self.consoleJSON(["signed_out": true], user: user)
                response.headers["Set-Cookie"] = ConsoleSessions.cookieHeader(nil, secure: secure)
                return response
            default:
                throw APIError(.methodNotAllowed, "The session answers GET, POST and DELETE.")
            }
        }

        // Everything else needs a session, and a change needs its CSRF token too.
        let session = try sessions.session(cookie: cookie)
        user = session.user
        let admin = Principal(user: session.user, role: .admin, team: "")
        func require(_ method: String) throws {
            guard request.method == method else { throw APIError(.methodNotAllowed, "This endpoint only answers \(method).") }
            if method != "GET" {
                try requireSameOrigin(request)
                try requireCSRF(request, session)
            }
        }
        func json(_ value: JSONValue) throws -> HTTPResponse { try Self.consoleJSON(value, user: user) }

        switch route {
        case ["records"]:
            try require("GET")
            return try json(try ConsoleRecords(database: database, config: config).search(
                ConsoleRecords.Filter(request.query, config: config)))
        case let parts where parts.count == 3 && parts[0] == "records":
            try require("GET")
            return try json(try ConsoleRecords(database: database, config: config).record(parts[1], parts[2]))
        case let parts where parts.count == 4 && parts[0] == "records" && parts[3] == "assign":
            try require("POST")
            let assignment = try consoleBody(AssignService.Assignment.self, request)
            let record = try AssignService(database: database, config: config, clock: clock, hub: liveHub, via: "console")
                .assign(parts[1], parts[2], assignment, as: admin)
            return try json(["uuid": .string(record.uuid.wireText), "owner": .string(record.owner), "team": .string(record.team),
                             "version": .int(record.version)])
        case ["devices"]:
            try require("GET")
            try sightings.write(to: database)
            return try json(try ConsoleDevices(database: database, config: config, connected: liveHub.connectedDevices, now: clock.now())
                .list(request.query))
        case ["problems"]:
            try require("GET")
            return try json(try ConsoleProblems.list(request.query, database: database))
        case ["tokens"]:
            let tokensPage = ConsoleTokens(tokens: tokens, database: database, clock: clock)
            if request.method == "POST" {
                try require("POST")
                return try json(try tokensPage.issue(try consoleBody(ConsoleTokens.Issue.self, request)))
            }
            try require("GET")
            return try json(try tokensPage.list(request.query))
        case let parts where parts.count == 3 && parts[0] == "tokens" && parts[2] == "revoke":
            try require("POST")
            return try json(try ConsoleTokens(tokens: tokens, database: database, clock: clock).revoke(id: parts[1]))
        case ["activity"]:
            try require("GET")
            // The activity log counts on the process's own clock, as the metrics do.
            var report = metrics.activity.report(now: Date()).objectValue ?? [:]
            let (longPolls, streams) = liveHub.counts
            report["live"] = ["streams": .int(Int64(streams)), "long_polls": .int(Int64(longPolls))]
            return try json(.object(report))
        case let parts where parts.count == 2 && parts[0] == "blobs":
            try require("GET")
            return try consoleThumbnail(parts[1], request, user: user)
        default:
            throw APIError(.notFound, "There is no such console endpoint.")
        }
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

    /// A browser's cross-site request is refused before anything else: the
    /// cookie is `SameSite=Strict` already, and this holds for browsers
    /// that send `Origin` or `Sec-Fetch-Site` but predate SameSite.
    private func requireSameOrigin(_ request: HTTPRequest) throws {
        let refused = APIError(.forbidden, "This request came from another site; the console only accepts its own pages' requests.")
        if let site = request.headers["sec-fetch-site"], site == "cross-site" || site == "same-site" { throw refused }
        guard let origin = request.headers["origin"] else { return }
        guard let host = request.headers["host"], origin == "http://\(host)" || origin == "https://\(host)" else { throw refused }
    }

    private func requireCSRF(_ request: HTTPRequest, _ session: ConsoleSessions.Session) throws {
        guard let sent = request.headers["x-csrf-token"], Self.constantTimeEqual(sent, session.csrf) else {
            throw APIError(.forbidden, "This change carries no valid CSRF token. Reload the console and try again.")
        }
    }

    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let left = Array(a.utf8)
        let right = Array(b.utf8)
        guard left.count == right.count else { return false }
        var difference: UInt8 = 0
        for index in left.indices { difference |= left[index] ^ right[index] }
        return difference == 0
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
    private func consoleThumbnail(_ sha: String, _ request: HTTPRequest, user: String?) throws -> HTTPResponse {
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
