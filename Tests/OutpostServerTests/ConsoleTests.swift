import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// A browser's side of the console, by hand: the session cookie and the
/// CSRF token it was given, sent back as the console's script does.
struct ConsoleClient {
    let live: LiveServer
    var cookie: String?
    var csrf: String?

    init(_ live: LiveServer) { self.live = live }

    /// Signs in with `token`; records the cookie and CSRF token of a success.
    @discardableResult
    mutating func signIn(_ token: String, extraHeaders: [String: String] = [:]) async throws -> LiveServer.Response {
        var headers = extraHeaders
        if let cookie { headers["Cookie"] = "outpost_console=\(cookie)" }
        let answer = try await live.send(
            "POST", "/admin/api/session", body: Data(#"{"token": "\#(token)"}"#.utf8), headers: headers)
        if answer.status == 200 {
            let issued: String = try #require(Self.cookieValue(answer.headers["set-cookie"]))
            cookie = issued
            csrf = try JSONValue.parse(answer.text).objectValue?["csrf"]?.stringValue
        }
        return answer
    }

    static func cookieValue(_ header: String?) -> String? {
        guard let header, header.hasPrefix("outpost_console=") else { return nil }
        return header.dropFirst("outpost_console=".count).split(separator: ";").first.map(String.init)
    }

    func send(
        _ method: String, _ target: String, json: String? = nil, csrf overrideCSRF: String?? = nil,
        headers extra: [String: String] = [:]
    ) async throws -> LiveServer.Response {
        var headers = extra
        if let cookie { headers["Cookie"] = "outpost_console=\(cookie)" }
        let token = overrideCSRF ?? csrf
        if method != "GET", let token { headers["X-CSRF-Token"] = token }
        return try await live.send(method, target, body: json.map { Data($0.utf8) }, headers: headers)
    }

    func get(_ target: String) async throws -> JSONValue {
        let answer = try await send("GET", target)
        guard answer.status == 200 else {
            Issue.record("GET \(target) answered \(answer.status): \(answer.text)")
            throw CancellationError()
        }
        return try JSONValue.parse(answer.text)
    }
}

extension JSONValue {
    subscript(key: String) -> JSONValue? { objectValue?[key] }
    var arrayValue: [JSONValue] {
        if case .array(let items) = self { return items }
        return []
    }
}

/// The administrator's console against a real socket: nothing answers
/// without a session, only administrators get one, every change needs
/// its CSRF token from the console's own origin, sessions end as they
/// should, and what the pages show is what happened.
// One test at a time: each sets up a server on each backend, and a full run's
// start already has every other suite doing the same on two cores.
@Suite("Console", .serialized, .timeLimit(.minutes(3)))
struct ConsoleTests {
    static let apiEndpoints: [(String, String)] = [
        ("GET", "/admin/api/session"), ("DELETE", "/admin/api/session"),
        ("GET", "/admin/api/records?collection=people"), ("GET", "/admin/api/records?collection=people&q=ana"),
        ("GET", "/admin/api/records/people/0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b"),
        ("POST", "/admin/api/records/people/0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b/assign"),
        ("GET", "/admin/api/devices"), ("GET", "/admin/api/problems"), ("GET", "/admin/api/tokens"),
        ("POST", "/admin/api/tokens"),
        ("POST", "/admin/api/tokens/\(String(repeating: "a", count: 64))/revoke"), ("GET", "/admin/api/activity"),
        ("GET", "/admin/api/blobs/\(String(repeating: "a", count: 64))"), ("GET", "/admin/api/nothing"),
    ]

    @Test(arguments: Backend.available)
    func nothingAnswersWithoutASession(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let field = try live.token("f-1")
        let page = try await live.get("/admin", token: nil)
        #expect(page.status == 200)
        #expect(page.headers["content-type"] == "text/html; charset=utf-8")
        let policy = try #require(page.headers["content-security-policy"])
        #expect(policy.contains("default-src 'none'") && policy.contains("script-src 'self'") && !policy.contains("unsafe"))
        #expect(page.headers["x-frame-options"] == "DENY")
        #expect(!page.text.contains("<script>"), "no inline script: the policy would refuse it")
        for (method, target) in Self.apiEndpoints {
            for cookie in [nil, "outpost_console=forged", "outpost_console=\(field)"] {
                var headers = ["X-CSRF-Token": "anything"]
                if let cookie { headers["Cookie"] = cookie }
                let answer = try await live.send(
                    method, target, token: field, body: method == "GET" ? nil : Data("{}".utf8), headers: headers)
                #expect(answer.status == 401, "\(method) \(target) with \(cookie ?? "no cookie"): \(answer.status)")
                #expect(answer.error?.code == .unauthenticated)
                #expect(answer.headers["content-security-policy"] != nil)
            }
        }
    }

    @Test(arguments: Backend.available)
    func onlyAnAdministratorGetsASession(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        for (user, role) in [("f-1", Role.field), ("c-1", .coordinator)] {
            var client = ConsoleClient(live)
            let answer = try await client.signIn(try live.token(user, role))
            #expect(answer.status == 403)
            #expect(answer.error?.message.contains("The console is for administrators") == true, "\(answer.text)")
            #expect(answer.headers["set-cookie"] == nil)
        }
        var stranger = ConsoleClient(live)
        #expect(try await stranger.signIn("opt_not-a-token").status == 401)
        let revoked = try live.token("boss-old", .admin)
        try live.server.tokens.revoke(revoked)
        #expect(try await stranger.signIn(revoked).status == 403)

        var admin = ConsoleClient(live)
        let answer = try await admin.signIn(try live.token("boss", .admin))
        #expect(answer.status == 200)
        let cookie = try #require(answer.headers["set-cookie"])
        #expect(cookie.contains("; HttpOnly") && cookie.contains("; SameSite=Strict") && cookie.contains("; Path=/admin"))
        #expect(!cookie.contains("Secure"), "plain HTTP: a Secure cookie would never come back")
        #expect(!answer.text.contains("opt_"), "the token is not echoed")
        let session = try await admin.get("/admin/api/session")
        #expect(session["user"] == "boss")
        #expect(session["collections"]?.arrayValue.contains { $0["name"] == "people" } == true)
        let stored = try live.database.read { try $0.query("SELECT hash FROM admin_sessions", []) }
        #expect(stored.count == 1 && stored[0].string(0) != admin.cookie, "only the cookie's hash is kept")
    }

    @Test func theCookieIsSecureOverTLS() throws {
        let directory = try TemporaryDirectory(prefix: "outpost-console")
        let server = try SyncServer(database: try SQLiteServerDatabase(path: directory.path("s.sqlite")), config: ServerConfig())
        let token = try server.tokens.issue(user: "boss", role: .admin, team: "hq", ttl: nil)
        var request = HTTPRequest(
            method: "POST", path: "/admin/api/session", headers: ["Content-Type": "application/json"],
            body: Data(#"{"token": "\#(token)"}"#.utf8))
        request.overTLS = true
        let answer = server.handle(request)
        #expect(answer.status == 200)
        #expect(answer.headers["Set-Cookie"]?.contains("; Secure") == true)
    }

    @Test(arguments: Backend.available)
    func changesNeedTheCSRFTokenFromTheConsolesOwnOrigin(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        var admin = ConsoleClient(live)
        try await admin.signIn(try live.token("boss", .admin))
        func tokenCount() throws -> Int64 {
            try live.database.read { try $0.first("SELECT COUNT(*) FROM tokens", [])?.int(0) ?? 0 }
        }
        let before = try tokenCount()
        let issue = #"{"user": "ana", "role": "field", "team": "north"}"#
        let refusals: [(String, LiveServer.Response)] = [
            ("no CSRF token", try await admin.send("POST", "/admin/api/tokens", json: issue, csrf: .some(nil))),
            ("a wrong one", try await admin.send("POST", "/admin/api/tokens", json: issue, csrf: "x")),
            ("another site's Origin", try await admin.send("POST", "/admin/api/tokens", json: issue, headers: ["Origin": "https://evil.example"])),
            ("a cross-site fetch", try await admin.send("POST", "/admin/api/tokens", json: issue, headers: ["Sec-Fetch-Site": "cross-site"])),
        ]
        for (what, answer) in refusals {
            #expect(answer.status == 403, "\(what): \(answer.status) \(answer.text)")
        }
        let form = try await live.send(
            "POST", "/admin/api/tokens", body: Data("user=ana&role=admin&team=x".utf8), contentType: "application/x-www-form-urlencoded",
            headers: ["Cookie": "outpost_console=\(admin.cookie ?? "")", "X-CSRF-Token": admin.csrf ?? ""])
        #expect(form.status == 400, "a form post is not JSON")
        #expect(try tokenCount() == before, "nothing was issued")
        let sameOrigin = try await admin.send(
            "POST", "/admin/api/tokens", json: issue, headers: ["Origin": "http://127.0.0.1:\(live.http.port)"])
        #expect(sameOrigin.status == 200, "\(sameOrigin.text)")
        #expect(try tokenCount() == before + 1)
        // Signing in from another site is refused too (login CSRF).
        var elsewhere = ConsoleClient(live)
        #expect(try await elsewhere.signIn(try live.token("boss2", .admin), extraHeaders: ["Origin": "https://evil.example"]).status == 403)
    }

    @Test(arguments: Backend.available)
    func signingInNeverKeepsACookieItWasGiven(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("boss", .admin)
        // An attacker plants a cookie of their choosing, then the administrator signs in.
        var victim = ConsoleClient(live)
        victim.cookie = "attacker-chosen-value"
        try await victim.signIn(token)
        #expect(victim.cookie != "attacker-chosen-value")
        var attacker = ConsoleClient(live)
        attacker.cookie = "attacker-chosen-value"
        #expect(try await attacker.send("GET", "/admin/api/session").status == 401)
        // Signing in again replaces the session: the old cookie stops working.
        let old = victim.cookie
        try await victim.signIn(token)
        #expect(victim.cookie != old)
        var stale = ConsoleClient(live)
        stale.cookie = old
        #expect(try await stale.send("GET", "/admin/api/session").status == 401)
        #expect(try await victim.send("GET", "/admin/api/session").status == 200)
    }

    @Test(arguments: Backend.available)
    func sessionsEndAtSignOutIdlenessExpiryAndRevocation(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("boss", .admin)
        var admin = ConsoleClient(live)
        try await admin.signIn(token)
        let out = try await admin.send("DELETE", "/admin/api/session")
        #expect(out.status == 200)
        #expect(out.headers["set-cookie"]?.contains("Max-Age=0") == true)
        #expect(try await admin.send("GET", "/admin/api/session").status == 401)

        try await admin.signIn(token)
        live.clock.advance(by: 29 * 60)
        #expect(try await admin.send("GET", "/admin/api/session").status == 200, "29 minutes idle: still on")
        live.clock.advance(by: 31 * 60)
        let idle = try await admin.send("GET", "/admin/api/session")
        #expect(idle.status == 401)
        #expect(idle.error?.message.contains("ended") == true)

        // A token that expires in 10 minutes gives a session of 10 minutes.
        let short = try live.token("boss-short", .admin, ttl: 600)
        var brief = ConsoleClient(live)
        try await brief.signIn(short)
        live.clock.advance(by: 9 * 60)
        #expect(try await brief.send("GET", "/admin/api/devices").status == 200)
        live.clock.advance(by: 2 * 60)
        #expect(try await brief.send("GET", "/admin/api/devices").status == 401)

        try await admin.signIn(token)
        try live.server.tokens.revoke(token)
        #expect(try await admin.send("GET", "/admin/api/devices").status == 401, "a revoked token's session ends at once")
    }

    @Test(arguments: Backend.available)
    func recordsShowTheirHistoryProblemsAndDevices(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let ana = try live.token("ana", team: "north")
        let coordinator = try live.token("carla", .coordinator, team: "north")
        var admin = ConsoleClient(live)
        try await admin.signIn(try live.token("boss", .admin))

        // Two devices of Ana's: one creates Mercedes, the other edits her twice.
        let phone = TestDevice()
        let tablet = TestDevice()
        let mercedes = UUID()
        func push(_ device: TestDevice, _ mutations: Mutation..., app: String) async throws -> PushResponse {
            let body = try WireCoding.encode(PushRequest(clientID: device.clientID, mutations: mutations))
            let answer = try await live.send(
                "POST", "/v1/push", token: ana, body: body,
                headers: ["Outpost-Device": device.clientID.wireText, "Outpost-Client": app, "Outpost-Schema": "3"])
            #expect(answer.status == 200, "\(answer.text)")
            return try answer.decode(PushResponse.self)
        }
        var others: [Mutation] = []
        for index in 1_000..<1_060 { others.append(phone.mutation(.create, data: ["name": .string("Person \(index) Silva")])) }
        _ = try await live.send(
            "POST", "/v1/push", token: ana, body: try WireCoding.encode(PushRequest(clientID: phone.clientID, mutations: others)))
        var create = phone.mutation(.create, uuid: mercedes, data: ["name": "Mercedes Romero", "phone": "555-0101"])
        create.deviceTime = ServerTimestamp(rawValue: "2026-11-30T08:00:00Z")
        let created = try await push(phone, create, app: "org.example.census/2.1")
        let v1 = try #require(created.results.first?.record?.version)
        let edit = tablet.mutation(.update, uuid: mercedes, base: v1, data: ["phone": "555-0202"])
        let edited = try await push(tablet, edit, app: "org.example.census/2.2")
        let v2 = try #require(edited.results.first?.record?.version)
        _ = try await push(tablet, tablet.mutation(.update, uuid: mercedes, base: v2, data: ["notes": "Second visit"]), app: "org.example.census/2.2")
        // The phone, not having seen the tablet's edits, changes the phone number.
        _ = try await push(phone, phone.mutation(.update, uuid: mercedes, base: v1, data: ["phone": "555-0303"]), app: "org.example.census/2.1")
        // The tablet sends a person without a name: refused.
        let invalid = tablet.mutation(.create, data: ["phone": "555-0404", "notes": "<script>alert(1)</script>"])
        let refused = try await push(tablet, invalid, app: "org.example.census/2.2")
        #expect(refused.results.first?.status == .rejected)
        // A coordinator's device that only pulls is seen too.
        let coordinatorDevice = UUID()
        _ = try await live.send("GET", "/v1/pull", token: coordinator, headers: ["Outpost-Device": coordinatorDevice.wireText])

        let found = try await admin.get("/admin/api/records?collection=people&q=romero")
        #expect(found["records"]?.arrayValue.map { $0["uuid"] } == [.string(mercedes.wireText)])
        #expect(try await admin.get("/admin/api/records?collection=people&q=merc")["records"]?.arrayValue.count == 1, "a word's start")
        #expect(try await admin.get("/admin/api/records?collection=people&q=silva")["records"]?.arrayValue.count == ConsoleRecords.pageSize)
        #expect(try await admin.get("/admin/api/records?collection=people&q=silva&owner=nobody")["records"]?.arrayValue.count == 0)
        #expect(try await admin.get("/admin/api/records?collection=people&q=silva&team=south")["records"]?.arrayValue.count == 0)
        #expect(try await admin.get("/admin/api/records?collection=people&q=person%201012")["records"]?.arrayValue.count == 1, "a number is a whole word")
        let page = try await admin.get("/admin/api/records?collection=people&owner=ana")
        #expect(page["records"]?.arrayValue.count == ConsoleRecords.pageSize && page["more"] == true)

        let record = try await admin.get("/admin/api/records/people/\(mercedes.wireText)")
        #expect(record["data"]?["phone"] == "555-0202", "the phone's stale edit lost (people: the server's copy wins)")
        let history = record["history"]?.arrayValue ?? []
        #expect(history.map { $0["op"] } == ["update", "update", "create"], "every version, newest first")
        #expect(history.map { $0["client"] } == [tablet, tablet, phone].map { .string($0.clientID.wireText) })
        #expect(history.last?["device_time"] == "2026-11-30T08:00:00Z")
        #expect(history.allSatisfy { $0["user"] == "ana" && $0["server_time"]?.stringValue?.isEmpty == false })
        #expect(history.first?["data"]?["notes"] == "Second visit")
        let readers = record["readers"]?["users"]?.arrayValue.compactMap { $0["user"]?.stringValue } ?? []
        #expect(Set(readers) == ["ana", "carla", "boss"])
        // The phone's last edit was made on a version since replaced: a conflict it lost.
        let conflict = try #require(record["problems"]?.arrayValue.first)
        #expect(conflict["kind"] == "conflict" && conflict["lost"] == "device")
        #expect(conflict["sent"]?["phone"] == "555-0303")
        #expect(conflict["server_data"]?["notes"] == "Second visit")

        let problems = try await admin.get("/admin/api/problems?kind=rejected")
        let rejection = try #require(problems["problems"]?.arrayValue.first)
        #expect(rejection["code"] == "invalid_field")
        #expect(rejection["errors"]?["name"] != nil)
        #expect(rejection["sent"]?["notes"] == "<script>alert(1)</script>", "the data sent, as sent")
        #expect(rejection["client"] == .string(tablet.clientID.wireText) && rejection["open"] == true)

        let devices = try await admin.get("/admin/api/devices?sort=recent")["devices"]?.arrayValue ?? []
        let byClient = Dictionary(uniqueKeysWithValues: devices.compactMap { device in device["client"]?.stringValue.map { ($0, device) } })
        let tabletRow = try #require(byClient[tablet.clientID.wireText])
        #expect(tabletRow["app"] == "org.example.census/2.2" && tabletRow["schema"] == 3)
        #expect(tabletRow["last_seq"] == .int(tablet.seq) && tabletRow["open_rejections"] == 1)
        #expect(tabletRow["blocking"]?.arrayValue.first?["code"] == "rejected_changes")
        #expect(byClient[phone.clientID.wireText]?["open_conflicts"] == 1)
        let pullOnly = try #require(byClient[coordinatorDevice.wireText], "a device that only pulls is listed")
        #expect(pullOnly["user"] == "carla" && pullOnly["last_seq"] == .null)
        let silent = try await admin.get("/admin/api/devices?sort=silent")["devices"]?.arrayValue ?? []
        #expect(silent.compactMap { $0["last_seen"]?.stringValue } == silent.compactMap { $0["last_seen"]?.stringValue }.sorted())

        // Deleted: its tombstone shows, and the deleted filter finds it.
        _ = try await push(phone, phone.mutation(.delete, uuid: mercedes), app: "org.example.census/2.1")
        #expect(try await admin.get("/admin/api/records?collection=people&q=romero")["records"]?.arrayValue.isEmpty == true)
        let gone = try await admin.get("/admin/api/records/people/\(mercedes.wireText)")
        #expect(gone["tombstone"]?["version"] != nil && gone["deleted"] == true)
        #expect(gone["history"]?.arrayValue.first?["op"] == "delete")
        #expect(try await admin.get("/admin/api/records?collection=people&deleted=deleted")["records"]?.arrayValue.count == 1)
    }

    @Test(arguments: Backend.available)
    func reassigningIssuingAndRevokingWork(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let ana = try live.token("ana", team: "north")
        _ = try live.token("bruno", team: "south")
        var admin = ConsoleClient(live)
        try await admin.signIn(try live.token("boss", .admin))
        let device = TestDevice()
        let person = UUID()
        _ = try await live.push(device.request(device.mutation(.create, uuid: person, data: ["name": "Rosa"])), token: ana)
        let target = "/admin/api/records/people/\(person.wireText)/assign"
        let unknown = try await admin.send("POST", target, json: #"{"owner": "nobody", "team": "south"}"#)
        #expect(unknown.status == 400 && unknown.error?.fields?["owner"] != nil)
        #expect(try await admin.get("/admin/api/records/people/\(person.wireText)")["owner"] == "ana", "nothing changed")
        let moved = try await admin.send("POST", target, json: #"{"owner": "bruno", "team": "south"}"#)
        #expect(moved.status == 200, "\(moved.text)")
        let record = try await admin.get("/admin/api/records/people/\(person.wireText)")
        #expect(record["owner"] == "bruno" && record["history"]?.arrayValue.first?["op"] == "assign")
        #expect(record["history"]?.arrayValue.first?["client"] == "console" && record["history"]?.arrayValue.first?["user"] == "boss")

        // Issue a token, use it, revoke it: the next sync is refused and its stream ends.
        let issued = try await admin.send("POST", "/admin/api/tokens", json: #"{"user": "dora", "role": "field", "team": "north", "ttl_seconds": 86400}"#)
        #expect(issued.status == 200)
        let answer = try JSONValue.parse(issued.text)
        let dora = try #require(answer["token"]?.stringValue)
        let id = try #require(answer["id"]?.stringValue)
        #expect(try await live.get("/v1/pull", token: dora).status == 200)
        let listed = try await admin.get("/admin/api/tokens")["tokens"]?.arrayValue ?? []
        let row = try #require(listed.first { $0["id"] == .string(id) })
        #expect(row["user"] == "dora" && row["state"] == "active" && row["expires_at"] != .null)
        let listing = try await admin.send("GET", "/admin/api/tokens").text
        #expect(!listing.contains(dora), "shown once, never listed")
        let stream = try await EventReader(live, "/v1/stream", token: dora)
        try await stream.wait("the stream is open") { !$0.isEmpty }
        let revoked = try await admin.send("POST", "/admin/api/tokens/\(id)/revoke", json: "{}")
        #expect(revoked.status == 200)
        let refused = try await live.get("/v1/pull", token: dora)
        #expect(refused.status == 403 && refused.error?.code == .tokenRevoked)
        try await stream.wait("the revoked token's stream ends") { $0.contains { $0.name == "error" } }
        #expect(try await admin.send("POST", "/admin/api/tokens/\(id)/revoke", json: "{}").status == 404, "already revoked")
        let after = try await admin.get("/admin/api/tokens")["tokens"]?.arrayValue ?? []
        #expect(after.first { $0["id"] == .string(id) }?["state"] == "revoked")
    }

    @Test(arguments: Backend.available)
    func badInputGetsAClearErrorAndChangesNothing(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        var admin = ConsoleClient(live)
        try await admin.signIn(try live.token("boss", .admin))
        func snapshot() throws -> [Int64] {
            try live.database.read { sql in
                try ["tokens", "records", "record_history", "push_problems"].map {
                    try sql.first("SELECT COUNT(*) FROM \($0)", [])?.int(0) ?? 0
                }
            }
        }
        let before = try snapshot()
        let long = String(repeating: "a", count: 201)
        let refusals: [(String, String, String?, Int, String?)] = [
            ("GET", "/admin/api/records", nil, 400, "collection"),
            ("GET", "/admin/api/records?collection=tokens", nil, 400, "collection"),
            ("GET", "/admin/api/records?collection=people&from=yesterday", nil, 400, "from"),
            ("GET", "/admin/api/records?collection=people&deleted=maybe", nil, 400, "deleted"),
            ("GET", "/admin/api/records?collection=people&q=\(long)", nil, 400, "q"),
            ("GET", "/admin/api/records?collection=people&q=%2A%2A", nil, 400, "q"),
            ("GET", "/admin/api/records/people/not-a-uuid", nil, 400, "uuid"),
            ("GET", "/admin/api/records/nothing/0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b", nil, 404, nil),
            ("GET", "/admin/api/records/people/0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b", nil, 404, nil),
            ("GET", "/admin/api/problems?kind=everything", nil, 400, "kind"),
            ("GET", "/admin/api/problems?open=yes", nil, 400, "open"),
            ("GET", "/admin/api/devices?sort=loudest", nil, 400, "sort"),
            ("POST", "/admin/api/tokens", #"{"user": "", "role": "field", "team": "t"}"#, 400, "user"),
            ("POST", "/admin/api/tokens", #"{"user": "x", "role": "owner", "team": "t"}"#, 400, "role"),
            ("POST", "/admin/api/tokens", #"{"user": "x", "role": "field", "team": "t\n"}"#, 400, "team"),
            ("POST", "/admin/api/tokens", #"{"user": "x", "role": "field", "team": "t", "ttl_seconds": 5}"#, 400, "ttl_seconds"),
            ("POST", "/admin/api/tokens", #"{"user": "x""#, 400, nil),
            ("POST", "/admin/api/tokens", #"{"user": "x", "role": "field"}"#, 400, nil),
            ("POST", "/admin/api/tokens/xyz/revoke", "{}", 400, "id"),
            ("POST", "/admin/api/tokens/\(String(repeating: "0", count: 64))/revoke", "{}", 404, nil),
            ("POST", "/admin/api/records/people/0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b/assign", #"{"owner": "a"}"#, 400, nil),
            ("PUT", "/admin/api/tokens", "{}", 405, nil),
            ("GET", "/admin/api/blobs/xyz", nil, 400, "sha256"),
            ("POST", "/admin/console.js", "{}", 405, nil),
            ("GET", "/admin/secret.txt", nil, 404, nil),
        ]
        for (method, target, body, status, field) in refusals {
            let answer = try await admin.send(method, target, json: body)
            #expect(answer.status == status, "\(method) \(target): \(answer.status) \(answer.text)")
            #expect(answer.error?.message.isEmpty == false, "\(method) \(target): a sentence")
            if let field { #expect(answer.error?.fields?[field] != nil, "\(method) \(target) names \(field): \(answer.text)") }
        }
        let huge = try await admin.send("POST", "/admin/api/tokens", json: #"{"user": ""# + String(repeating: "x", count: 70_000) + #""}"#)
        #expect(huge.status == 413)
        #expect(try snapshot() == before)
    }

    @Test(arguments: Backend.available)
    func activityCountsPushesPullsAndErrors(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let ana = try live.token("ana")
        var admin = ConsoleClient(live)
        try await admin.signIn(try live.token("boss", .admin))
        let device = TestDevice()
        _ = try await live.push(device.request(device.mutation(.create, data: ["name": "Ana"]), device.mutation(.create, data: ["name": "Bea"])), token: ana)
        _ = try await live.pullAll(token: ana)
        _ = try await live.get("/v1/pull", token: "opt_unknown")
        // The socket's request counting runs after the answer is sent.
        let signedIn = admin
        try await eventually("the activity shows the requests") {
            let report = try await signedIn.get("/admin/api/activity")
            let minutes = report["minutes"]?.arrayValue ?? []
            let total = { (name: String) in minutes.reduce(Int64(0)) { $0 + ($1[name]?.intValue ?? 0) } }
            let errors = report["errors"]?.arrayValue ?? []
            return total("pushes") == 1 && total("mutations") == 2 && total("pulls") >= 2 && total("records_pulled") >= 2
                && errors.contains { $0["status"] == 401 && $0["code"] == "unauthenticated" && $0["route"] == "/v1/pull" }
        }
        let report = try await admin.get("/admin/api/activity")
        #expect(report["minutes"]?.arrayValue.count == 30)
        #expect(report["live"]?["streams"] == 0)
    }

    @Test(arguments: Backend.available)
    func aLastWriteWinsOverwriteIsAConflictTheServersVersionLost(_ backend: Backend) async throws {
        var config = try ServerConfig()
        config.collections["notes"] = CollectionSchema(
            name: "notes", fields: ["text": FieldSchema(.text, required: true)], policy: .lastWriteWins)
        let live = try LiveServer(backend, config: config)
        let ana = try live.token("ana")
        var admin = ConsoleClient(live)
        try await admin.signIn(try live.token("boss", .admin))
        let phone = TestDevice()
        let tablet = TestDevice()
        let note = UUID()
        let created = try await live.push(phone.request(phone.mutation(.create, "notes", uuid: note, data: ["text": "Gate code 1234"])), token: ana)
        let v1 = try #require(created.results.first?.record?.version)
        _ = try await live.push(tablet.request(tablet.mutation(.update, "notes", uuid: note, base: v1, data: ["text": "Gate code 5678"])), token: ana)
        let late = try await live.push(phone.request(phone.mutation(.update, "notes", uuid: note, base: v1, data: ["text": "Gate code 9999"])), token: ana)
        #expect(late.results.first?.status == .applied, "the last write wins")
        let problems = try await admin.get("/admin/api/problems?kind=conflict")["problems"]?.arrayValue ?? []
        let conflict = try #require(problems.first)
        #expect(conflict["lost"] == "server" && conflict["client"] == .string(phone.clientID.wireText))
        #expect(conflict["server_data"]?["text"] == "Gate code 5678", "the version that was overwritten, kept for the administrator")
        #expect(conflict["sent"]?["text"] == "Gate code 9999")
        #expect(conflict["base_version"] == .int(v1))
    }

    @Test(arguments: Backend.available)
    func searchIgnoresAccentsAndCaseOnBothBackends(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let ana = try live.token("ana")
        var admin = ConsoleClient(live)
        try await admin.signIn(try live.token("boss", .admin))
        let device = TestDevice()
        _ = try await live.push(
            device.request(
                device.mutation(.create, data: ["name": "Lucía Núñez"]), device.mutation(.create, data: ["name": "JOSÉ ÖZTÜRK"]),
                device.mutation(.create, data: ["name": "Lucas Nunes"])), token: ana)
        func names(_ query: String) async throws -> Set<String> {
            let found = try await admin.get("/admin/api/records?collection=people&q=\(query)")["records"]?.arrayValue ?? []
            return Set(found.compactMap { $0["data"]?["name"]?.stringValue })
        }
        #expect(try await names("lucia%20nunez") == ["Lucía Núñez"])
        #expect(try await names("LUC%C3%8DA") == ["Lucía Núñez"])
        #expect(try await names("luc") == ["Lucía Núñez", "Lucas Nunes"])
        #expect(try await names("jose%20ozturk") == ["JOSÉ ÖZTÜRK"])
        #expect(try await names("nun") == ["Lucía Núñez", "Lucas Nunes"])
        // The sync API's search reads the same index.
        let answer = try await live.get("/v1/search?collection=people&q=nunez", token: ana)
        #expect(try answer.decode(SearchResponse.self).records.count == 1)
    }

    @Test(arguments: Backend.available)
    func aRecordsPhotoShowsAsAThumbnailAndNothingElseIsServedAsOne(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let ana = try live.token("ana")
        var admin = ConsoleClient(live)
        try await admin.signIn(try live.token("boss", .admin))
        let photo = Array("\u{89}PNG\r\n\u{1A}\n a small photo of a door".utf8)
        let sha = BlobTests.sha256(photo)
        #expect(try await live.send("PUT", "/v1/blobs/\(sha)", token: ana, body: Data(photo), contentType: "image/png").status == 200)
        let page = Array("<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>".utf8)
        let svg = BlobTests.sha256(page)
        #expect(try await live.send("PUT", "/v1/blobs/\(svg)", token: ana, body: Data(page), contentType: "image/svg+xml").status == 200)
        let device = TestDevice()
        let person = UUID()
        let visit = UUID()
        let file = try #require(AttachedFile(sha256: sha, size: Int64(photo.count), contentType: "image/png"))
        _ = try await live.push(
            device.request(
                device.mutation(.create, uuid: person, data: ["name": "Rosa"]),
                device.mutation(.create, "visits", uuid: visit, data: [
                    "person": .string(person.wireText), "visited_at": "2026-11-30T09:00:00Z", "photo": file.jsonValue,
                ])), token: ana)
        let record = try await admin.get("/admin/api/records/visits/\(visit.wireText)")
        let attachment = try #require(record["attachments"]?.arrayValue.first)
        #expect(attachment["field"] == "photo" && attachment["sha256"] == .string(sha) && attachment["held"] == true)
        let image = try await admin.send("GET", "/admin/api/blobs/\(sha)")
        #expect(image.status == 200 && Array(image.body) == photo)
        #expect(image.headers["content-type"] == "image/png" && image.headers["x-content-type-options"] == "nosniff")
        #expect(try await admin.send("GET", "/admin/api/blobs/\(svg)").status == 404, "an SVG can carry script: never served to the console")
        #expect(try await live.send("GET", "/admin/api/blobs/\(sha)", token: ana).status == 401, "a bearer token is not a session")
    }
}

