import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Bad input and invariant I7: a seeded generator of malformed and hostile
/// requests against a live server, over the real socket, on every endpoint
/// and both backends. Every answer must be below 500, a 2xx only for a
/// request that is in fact valid, every 4xx the JSON error body, no answer may
/// carry another user's data, the server must still answer afterwards, and
/// not one row of the server's tables may change.
@Suite("Hostile input", .timeLimit(.minutes(10)))
struct HostileInputTests {
    /// Requests per backend. Replay a failure with the same seed: the
    /// generator is deterministic (fixture ids are seeded too).
    static let requestCount = 12_000
    static let concurrency = 8
    static let seed: UInt64 = 0x5EED_0517_0007

    @Test(arguments: Backend.available)
    func generatedHostileRequestsAreRefusedLeakNothingAndChangeNothing(_ backend: Backend) async throws {
        let started = ContinuousClock.now
        let live = try LiveServer(backend)
        let fixture = try await HostileFixture.seed(live, seed: Self.seed)
        let before = try HostileFixture.snapshot(live)

        // Generating 12,000 requests is seconds of CPU: on a thread of its
        // own, not on one of the two threads every other test shares.
        let requests = try await runBlocking {
            var generator = HostileRequestGenerator(fixture: fixture, seed: Self.seed)
            return (0..<Self.requestCount).map { _ in generator.next() }
        }
        let ledger = HostileLedger()
        let secrets = fixture.secrets
        let port = live.http.port
        let sending = ContinuousClock.now
        await HostileRunner.run(requests, width: Self.concurrency) { index, request in
            let reply = Result { try HostileSocket.exchange(port: port, request: request.bytes(port: port)) }
            ledger.record(index, request, reply, secrets: secrets)
        }
        let sent = ContinuousClock.now - sending

        // Still answering, and still serving its real users.
        let health = try await live.get("/v1/health", token: nil)
        #expect(health.status == 200, "the server stopped answering after the hostile requests")
        let victim = try await live.pullAll(token: fixture.victimTokens[0], query: "&collections=people")
        #expect(!victim.changes.isEmpty)

        // Nothing changed, anywhere.
        let after = try HostileFixture.snapshot(live)
        for table in before.keys.sorted() {
            #expect(before[table] == after[table], "hostile requests changed the table \(table)")
        }

        let summary = try await runBlocking { ledger.summary() }
        let mustFail = requests.filter { $0.expect == .refused }.count
        let mustPass = requests.filter { $0.expect == .accepted }.count
        print(
            "HostileInput[\(backend.rawValue)]: \(requests.count) requests (\(mustFail) must be refused, \(mustPass) must succeed, \(requests.count - mustFail - mustPass) either) answered \(summary.accepted) 2xx, \(summary.refused) 4xx in \(sent); whole test \(ContinuousClock.now - started); statuses \(summary.statuses)"
        )
        #expect(requests.count >= 10_000)
        #expect(summary.failures.isEmpty, "\(summary.failures.count) hostile requests broke a rule (first ones recorded below)")
        for failure in summary.failures.prefix(25) { Issue.record(Comment(rawValue: failure)) }
    }

    /// A NUL character is valid JSON text (`\u0000`) but cannot be stored in
    /// PostgreSQL text. Wherever a client string reaches a text column it
    /// must be stored or refused, never a 5xx. Each write here goes to a
    /// record of the writer's own (or, for the admin, one it may assign).
    @Test(arguments: Backend.available)
    func nulCharactersInOtherwiseValidWritesAreNeverA5xx(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("f-1", team: "t-1")
        let admin = try live.token("a-1", .admin, team: "hq")
        let uuid = UUID().wireText
        let client = UUID().wireText
        let create = #"{"client_id": "\#(client)", "mutations": [{"seq": 1, "id": "\#(UUID().wireText)", "op": "create", "collection": "people", "uuid": "\#(uuid)", "data": {"name": "A\u0000B", "notes": "\u0000"}}]}"#
        let pushed = try await live.send("POST", "/v1/push", token: token, body: Data(create.utf8))
        #expect(pushed.status < 500, "push with \\u0000 in data answered \(pushed.status): \(pushed.text.prefix(300))")
        let seeded = try await live.push(
            PushRequest(clientID: UUID(), mutations: [
                Mutation(seq: 1, id: UUID(), op: .create, collection: "people", uuid: UUID(), data: ["name": "plain"])
            ]), token: token)
        let target = try #require(seeded.results.first?.record?.uuid.wireText)
        for body in [#"{"owner": "f-\u00002", "team": "t-1"}"#, #"{"owner": "f-2", "team": "t\u0000-1"}"#] {
            let assign = try await live.send(
                "POST", "/v1/records/people/\(target)/assign", token: admin, body: Data(body.utf8))
            #expect(
                assign.status < 500,
                "POST /v1/records/people/{uuid}/assign as admin with body \(body) answered \(assign.status): \(assign.text.prefix(300))")
        }
        let search = try await live.get("/v1/search?collection=people&q=A%00B", token: token)
        #expect(search.status < 500)
    }
}

// MARK: - Fixture: victims, attacker, snapshot

/// The data the hostile requests aim at: other users' records and mutation
/// ids, catalogs, and the attacker's tokens (a field user who owns nothing).
struct HostileFixture: Sendable {
    var attacker: String
    /// An administrator's token, used only for assignments that cannot apply.
    var admin: String
    var revoked: String
    var expired: String
    var victimTokens: [String]
    var victimPeople: [String]
    var victimVisits: [String]
    var victimTombstones: [String]
    var victimMutationIDs: [String]
    var victimSecrets: [String]
    var catalogUUIDs: [String]
    /// Pull cursors: the attacker's own (valid), and ones of another scope.
    var validCursors: [String]
    var foreignCursors: [String]

    /// Strings that must never appear in an answer to the attacker unless
    /// the attacker sent them.
    var secrets: [String] {
        victimPeople + victimVisits + victimTombstones + victimMutationIDs + victimSecrets
    }

    static func seed(_ live: LiveServer, seed: UInt64) async throws -> HostileFixture {
        var dice = HostileDice(seed: seed ^ 0xF1C7)
        var people: [String] = []
        var visits: [String] = []
        var tombstones: [String] = []
        var mutationIDs: [String] = []
        var secrets: [String] = []
        var victimTokens: [String] = []
        let victims: [(String, Role, String)] = [
            ("f-1", .field, "t-1"), ("f-2", .field, "t-1"), ("f-3", .field, "t-2"), ("c-1", .coordinator, "t-1"),
        ]
        for (user, role, team) in victims {
            let token = try live.token(user, role, team: team)
            victimTokens.append(token)
            let client = dice.uuid()
            var seq: Int64 = 0
            func mutation(_ op: MutationOp, _ collection: String, _ uuid: UUID, base: Int64? = nil, data: JSONObject?)
                -> Mutation
            {
                seq += 1
                let id = dice.uuid()
                mutationIDs.append(id.wireText)
                return Mutation(seq: seq, id: id, op: op, collection: collection, uuid: uuid, baseVersion: base, data: data)
            }
            let person = dice.uuid()
            let second = dice.uuid()
            let gone = dice.uuid()
            let visit = dice.uuid()
            let secret = "zqsecret\(user.replacingOccurrences(of: "-", with: ""))"
            secrets += [secret + "p0", secret + "p1", secret + "v0", secret + "phone"]
            let created = try await live.push(
                PushRequest(clientID: client, mutations: [
                    mutation(.create, "people", person, data: ["name": .string(secret + "p0"), "section": 3]),
                    mutation(.create, "people", second, data: ["name": .string(secret + "p1")]),
                    mutation(.create, "people", gone, data: ["name": "soon gone"]),
                    mutation(
                        .create, "visits", visit,
                        data: [
                            "person": .string(person.wireText), "visited_at": "2026-03-01T10:00:00Z",
                            "notes": .string(secret + "v0"),
                        ]),
                ]), token: token)
            #expect(created.results.allSatisfy { $0.status == MutationStatus.applied })
            let version = try #require(created.results[0].record?.version)
            let changed = try await live.push(
                PushRequest(clientID: client, mutations: [
                    mutation(.update, "people", person, base: version, data: ["phone": .string(secret + "phone")]),
                    mutation(.delete, "people", gone, data: nil),
                ]), token: token)
            #expect(changed.results.allSatisfy { $0.status == MutationStatus.applied })
            people += [person.wireText, second.wireText]
            visits.append(visit.wireText)
            tombstones.append(gone.wireText)
        }
        let attacker = try live.token("x-9", .field, team: "t-9")
        let revoked = try live.token("x-9", .field, team: "t-9")
        #expect(try live.server.tokens.revoke(revoked))
        let expired = try live.token("x-9", .field, team: "t-9", ttl: -60)
        let catalogs = try await live.pullAll(token: attacker, query: "&collections=catalogs").changes.map(\.uuid.wireText)
        #expect(catalogs.count == CatalogSeed.entries.count)
        let config = live.server.config
        let attackerTag = Scope(principal: Principal(user: "x-9", role: .field, team: "t-9"), config: config).tag
        let victimTag = Scope(principal: Principal(user: "f-1", role: .field, team: "t-1"), config: config).tag
        return HostileFixture(
            attacker: attacker, admin: try live.token("a-9", .admin, team: "hq"), revoked: revoked, expired: expired,
            victimTokens: victimTokens, victimPeople: people, victimVisits: visits, victimTombstones: tombstones,
            victimMutationIDs: mutationIDs, victimSecrets: secrets, catalogUUIDs: catalogs,
            validCursors: [PullCursorCodec.encode(0, scopeTag: attackerTag), PullCursorCodec.encode(1, scopeTag: attackerTag)],
            // Refused with 410: another scope's, and the attacker's own from
            // past the end of the feed (a version the server never reached).
            foreignCursors: [
                PullCursorCodec.encode(0, scopeTag: victimTag), PullCursorCodec.encode(0, scopeTag: ""),
                PullCursorCodec.encode(Int64.max, scopeTag: attackerTag),
            ])
    }

    /// Every row of every server table, in a fixed order.
    static func snapshot(_ live: LiveServer) throws -> [String: [SQLRow]] {
        let tables = [
            ("records", "id"), ("scope_exits", "version"), ("client_seqs", "user_id, client_id"),
            ("mutation_results", "user_id, client_id, seq"), ("server_state", "key"), ("tokens", "hash"),
        ]
        return try live.database.read { sql in
            var rows: [String: [SQLRow]] = [:]
            for (table, order) in tables {
                rows[table] = try sql.query("SELECT * FROM \(table) ORDER BY \(order)", [])
            }
            return rows
        }
    }
}

// MARK: - Seeded choices

/// SplitMix64 (OutpostCore's `SeededRandom`) with the few choices the generator needs.
struct HostileDice {
    var random: SeededRandom

    init(seed: UInt64) { random = SeededRandom(seed: seed) }

    mutating func int(_ range: Range<Int>) -> Int { Int.random(in: range, using: &random) }
    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
    mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &random) < probability }
    mutating func pick<T>(_ items: [T]) -> T { items[int(0..<items.count)] }

    mutating func uuid() -> UUID {
        let text = String(format: "%016llx%016llx", random.next(), random.next())
        let chars = Array(text)
        let parts = [chars[0..<8], chars[8..<12], chars[12..<16], chars[16..<20], chars[20..<32]].map { String($0) }
        return UUID(uuidString: parts.joined(separator: "-"))!
    }

    /// Letters and digits, `count` long.
    mutating func word(_ count: Int) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        return String((0..<count).map { _ in pick(alphabet) })
    }
}

// MARK: - JSON that no encoder would write

/// A JSON tree for hostile bodies: keeps key order and duplicate keys, and
/// holds raw text (numbers out of range, literals, invalid bytes) as is.
indirect enum HostileJSON {
    case object([(String, HostileJSON)])
    case array([HostileJSON])
    case string(String)
    /// Bytes placed between quotes without escaping (invalid UTF-8, raw control bytes).
    case rawString([UInt8])
    /// Any text, written as is: numbers, literals, garbage.
    case raw(String)

    var bytes: [UInt8] {
        var out: [UInt8] = []
        render(into: &out)
        return out
    }

    func render(into out: inout [UInt8]) {
        switch self {
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                Self.quote(key, into: &out)
                out.append(UInt8(ascii: ":"))
                value.render(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                item.render(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .string(let text): Self.quote(text, into: &out)
        case .rawString(let bytes):
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: bytes)
            out.append(UInt8(ascii: "\""))
        case .raw(let text): out.append(contentsOf: text.utf8)
        }
    }

    static func quote(_ text: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [92, 34])
            case UInt8(ascii: "\\"): out.append(contentsOf: [92, 92])
            case 0..<0x20: out.append(contentsOf: Array(String(format: "\\u%04x", byte).utf8))
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    var members: [(String, HostileJSON)]? {
        if case .object(let members) = self { return members }
        return nil
    }

    func value(_ key: String) -> HostileJSON? { members?.first { $0.0 == key }?.1 }

    /// Replaces every member named `key`, or appends one.
    mutating func set(_ key: String, _ value: HostileJSON) {
        guard var members else { return }
        if members.contains(where: { $0.0 == key }) {
            members = members.map { $0.0 == key ? (key, value) : $0 }
        } else {
            members.append((key, value))
        }
        self = .object(members)
    }

    mutating func remove(_ key: String) {
        guard let members else { return }
        self = .object(members.filter { $0.0 != key })
    }

    /// Adds a member at a given place (a duplicate key when `key` exists).
    mutating func insert(_ key: String, _ value: HostileJSON, at position: Int) {
        guard var members else { return }
        members.insert((key, value), at: min(position, members.count))
        self = .object(members)
    }

    var stringText: String? {
        if case .string(let text) = self { return text }
        return nil
    }
}

// MARK: - Requests, and the model of what the server must answer

/// One hostile request, as bytes on the wire.
struct HostileRequest: Sendable {
    enum Expect: Sendable {
        /// A 4xx with the error body.
        case refused
        /// A 2xx: the request is valid (health, a valid read).
        case accepted
        /// Valid or not depends on how the HTTP layer decodes a malformed
        /// escape or picks among repeated headers: a 2xx or a 4xx with the
        /// error body, both fine. Only reads, which change nothing, get this.
        case either
    }

    var label: String
    var method: String
    var target: [UInt8]
    var headers: [(String, [UInt8])]
    var body: [UInt8]?
    var chunked = false
    var expect: Expect

    func bytes(port: UInt16) -> [UInt8] {
        var out = Array(method.utf8) + [32] + target + Array(" HTTP/1.1\r\n".utf8)
        out += Array("Host: 127.0.0.1:\(port)\r\nConnection: close\r\n".utf8)
        for (name, value) in headers { out += Array("\(name): ".utf8) + value + [13, 10] }
        if let body {
            if chunked {
                out += Array("Transfer-Encoding: chunked\r\n\r\n".utf8)
                var offset = 0
                while offset < body.count {
                    let size = min(7 + offset % 13, body.count - offset)
                    out += Array(String(size, radix: 16).utf8) + [13, 10] + body[offset..<offset + size] + [13, 10]
                    offset += size
                }
                out += Array("0\r\n\r\n".utf8)
                return out
            }
            out += Array("Content-Length: \(body.count)\r\n\r\n".utf8) + body
            return out
        }
        return out + [13, 10]
    }

    /// The start of the request, printable, for failure messages.
    var excerpt: String {
        let head = Array((Array(method.utf8) + [32] + target).prefix(300))
        var text = String(decoding: head, as: UTF8.self)
        if let auth = headers.first(where: { $0.0 == "Authorization" }) {
            text += " [auth: \(String(decoding: auth.1.prefix(60), as: UTF8.self))]"
        }
        if let type = headers.first(where: { $0.0 == "Content-Type" }) {
            text += " [type: \(String(decoding: type.1, as: UTF8.self))]"
        }
        if let body {
            text += " [body \(body.count) bytes: \(String(decoding: body.prefix(240), as: UTF8.self).debugDescription)]"
        }
        return text
    }
}

/// What the server sees of a request target, and which answer that calls
/// for: an independent model of libmicrohttpd's decoding and of the routes
/// in docs/protocol.md, from the attacker's side (a field user who owns nothing).
struct HostileModel {
    let catalogUUIDs: Set<String>
    let validCursors: Set<String>
    static let collections: Set<String> = ["people", "visits", "catalogs"]

    enum Auth { case attacker, refused, unknown }

    /// Percent-decodes like libmicrohttpd (optionally `+` as a space, for
    /// query arguments), then as the server reads a C string: cut at NUL,
    /// invalid UTF-8 repaired. Nil when an escape is malformed.
    static func decode(_ raw: ArraySlice<UInt8>, plusIsSpace: Bool) -> String? {
        var out: [UInt8] = []
        var index = raw.startIndex
        func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case 48...57: return byte - 48
            case 65...70: return byte - 55
            case 97...102: return byte - 87
            default: return nil
            }
        }
        while index < raw.endIndex {
            let byte = raw[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < raw.endIndex, let high = hex(raw[index + 1]), let low = hex(raw[index + 2]) else {
                    return nil
                }
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(plusIsSpace && byte == UInt8(ascii: "+") ? 32 : byte)
                index += 1
            }
        }
        if let nul = out.firstIndex(of: 0) { out.removeSubrange(nul...) }
        return String(decoding: out, as: UTF8.self)
    }

    /// The decoded query arguments; the last of repeated names wins. Nil when unknown.
    static func arguments(_ query: ArraySlice<UInt8>) -> [String: String]? {
        var values: [String: String] = [:]
        for piece in query.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let key: ArraySlice<UInt8>
            var value: ArraySlice<UInt8> = []
            if let equals = piece.firstIndex(of: UInt8(ascii: "=")) {
                key = piece[piece.startIndex..<equals]
                value = piece[(equals + 1)...]
            } else {
                key = piece
            }
            guard let name = decode(key, plusIsSpace: true), let text = decode(value, plusIsSpace: true) else { return nil }
            values[name] = text
        }
        return values
    }

    static func isUUID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                if byte != UInt8(ascii: "-") { return false }
            } else if !(48...57).contains(byte) && !(97...102).contains(byte) && !(65...70).contains(byte) {
                return false
            }
        }
        return true
    }

    static let validTimes: Set<String> = [
        "2026-01-01T00:00:00Z", "1970-01-01T00:00:00.000000Z", "2026-11-29T10:00:00+05:30", "2026-11-29T10:00:00-11:00",
        "9999-12-31T23:59:59.999999999Z", "0000-01-01T00:00:00Z", "2026-02-31T00:00:00z", "2026-06-30t12:00:00.5Z",
    ]
    static let invalidTimes: Set<String> = [
        "yesterday", "", "2026-13-01T00:00:00Z", "2026-01-01", "2026-01-01T00:00:00", "2026-01-01T00:00:00.1234567890Z",
        "' OR 1=1 --", "1e9", "2026-01-01T25:00:00Z", "2026-01-01 00:00:00Z", "-001-01-01T00:00:00Z",
        "2026-01-01T00:00:00+5:30", "2026-01-01T00:00:00.Z", "0", "NaN", "2026-01-01T00:00:00ZZ",
    ]

    /// Whether the window start is valid; nil when the model does not know the text.
    static func time(_ text: String?) -> Bool? {
        guard let text else { return true }
        if validTimes.contains(text) { return true }
        if invalidTimes.contains(text) { return false }
        return nil
    }

    func expect(method: String, target: [UInt8], auth: Auth) -> HostileRequest.Expect {
        // Nothing but health and a few reads can ever succeed for the attacker.
        let question = target.firstIndex(of: UInt8(ascii: "?")) ?? target.endIndex
        guard let path = Self.decode(target[..<question], plusIsSpace: false) else {
            return method == "GET" ? .either : .refused
        }
        let query = question < target.endIndex ? target[(question + 1)...] : []
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        // The console's page, style and script are public (they hold no data; every API call needs a session).
        if method == "GET" || method == "HEAD",
            ["/admin", "/admin/", "/admin/index.html", "/admin/console.css", "/admin/console.js", "/admin/console-strings.js"]
                .contains(path)
        {
            return .accepted
        }
        guard method == "GET", parts.count >= 3, parts[0] == "", parts[1] == "v1" else { return .refused }
        let route = Array(parts.dropFirst(2))
        if route == ["health"] { return .accepted }
        let known: Bool
        switch route.count {
        case 1 where ["pull", "scope", "search"].contains(route[0]): known = true
        case 3 where route[0] == "records": known = true
        default: known = false
        }
        guard known else { return .refused }
        switch auth {
        case .refused: return .refused
        case .unknown: return .either
        case .attacker: break
        }
        guard let arguments = Self.arguments(query) else { return .either }
        let valid: Bool?
        switch route[0] {
        case "pull":
            let names = arguments["collections"].map { $0.split(separator: ",").map(String.init) } ?? []
            let limit = arguments["limit"].map { Int($0).map { (1...5000).contains($0) } ?? false } ?? true
            // A valid cursor with base64 padding added may decode to the same cursor: unknown.
            let cursor: Bool? = arguments["cursor"].map { text in
                if validCursors.contains(text) { return true }
                var unpadded = text
                while unpadded.hasSuffix("=") { unpadded.removeLast() }
                return validCursors.contains(unpadded) ? nil : false
            } ?? true
            let window = Self.time(arguments["window_start"])
            if !names.allSatisfy(Self.collections.contains) || !limit || cursor == false || window == false {
                valid = false
            } else {
                valid = cursor == nil || window == nil ? nil : true
            }
        case "scope":
            valid = Self.time(arguments["window_start"])
        case "search":
            let collection = arguments["collection"].map(Self.collections.contains) ?? false
            let q = arguments["q"].map { !$0.isEmpty && $0.utf8.count <= 200 } ?? false
            let limit = arguments["limit"].map { Int($0).map { (1...200).contains($0) } ?? false } ?? true
            valid = collection && q && limit
        default:  // records/{collection}/{uuid}
            valid = route[1] == "catalogs" && Self.isUUID(route[2]) && catalogUUIDs.contains(route[2].lowercased())
        }
        switch valid {
        case true?: return .accepted
        case false?: return .refused
        case nil: return .either
        }
    }
}

// MARK: - The generator

/// Produces hostile requests from a seed. Every push it makes is invalid in
/// at least one way certain to stop it before any write (or is sent without
/// a valid token), and every assignment is refused, so no request may
/// change anything.
struct HostileRequestGenerator {
    let fixture: HostileFixture
    let model: HostileModel
    var dice: HostileDice
    var hugeBodies = 0

    init(fixture: HostileFixture, seed: UInt64) {
        self.fixture = fixture
        self.model = HostileModel(catalogUUIDs: Set(fixture.catalogUUIDs), validCursors: Set(fixture.validCursors))
        self.dice = HostileDice(seed: seed)
    }

    mutating func next() -> HostileRequest {
        switch dice.int(0..<100) {
        case 0..<30: return brokenPush()
        case 30..<37: return byteBrokenPush()
        case 37..<41: return wrongContentTypePush()
        case 41..<46: return unauthenticatedPush()
        case 46..<48: return oddPushTransport()
        case 48..<59: return read(.pull)
        case 59..<68: return read(.search)
        case 68..<72: return read(.scope)
        case 72..<75: return read(.health)
        case 75..<83: return read(.record)
        case 83..<87: return read(.mutation)
        case 87..<91: return assign()
        case 91..<93: return adminAssign()
        case 93..<96: return oddMethod()
        case 96..<98: return consoleRequest()
        default: return unknownPath()
        }
    }

    // MARK: Tokens

    static let wrongAuthLabels = [
        "missing", "Bearer", "Bearer-space", "Basic", "lowercase bearer", "BEARER", "unknown opt_", "token+x", "token-1",
        "sql", "257 bytes", "4000 bytes", "revoked", "expired", "two tokens", "invalid UTF-8", "tab", "Token scheme",
        "no scheme", "percent", "opt_ only", "null", "empty value",
    ]

    /// Authorization headers of a request that must not authenticate.
    mutating func wrongAuth() -> (label: String, headers: [(String, [UInt8])]) {
        let attacker = fixture.attacker
        let label = dice.pick(Self.wrongAuthLabels)
        let value: String?
        switch label {
        case "missing": value = nil
        case "Bearer": value = "Bearer"
        case "Bearer-space": value = "Bearer "
        case "Basic": value = "Basic " + Data("x-9:password".utf8).base64EncodedString()
        case "lowercase bearer": value = "bearer " + attacker
        case "BEARER": value = "BEARER " + attacker
        case "unknown opt_": value = "Bearer opt_" + dice.word(43)
        case "token+x": value = "Bearer " + attacker + "x"
        case "token-1": value = "Bearer " + attacker.dropLast()
        case "sql": value = "Bearer ' OR '1'='1' --"
        case "257 bytes": value = "Bearer " + String(repeating: "A", count: 257)
        case "4000 bytes": value = "Bearer opt_" + String(repeating: "B", count: 4000)
        case "revoked": value = "Bearer " + fixture.revoked
        case "expired": value = "Bearer " + fixture.expired
        case "two tokens": value = "Bearer " + attacker + " " + attacker
        case "invalid UTF-8":
            return (label, [("Authorization", Array("Bearer ".utf8) + [0xFF, 0xFE, 0xC0, 0xAF] + Array(attacker.utf8))])
        case "tab": value = "Bearer\t" + attacker
        case "Token scheme": value = "Token " + attacker
        case "no scheme": value = attacker
        case "percent": value = "Bearer %6F" + attacker.dropFirst()
        case "opt_ only": value = "Bearer opt_"
        case "null": value = "Bearer null"
        default: value = ""
        }
        return (label, value.map { [("Authorization", Array($0.utf8))] } ?? [])
    }

    /// Mostly the attacker's valid token (in a few harmless spellings),
    /// sometimes a wrong one, sometimes two headers.
    mutating func someAuth() -> (label: String, headers: [(String, [UInt8])], auth: HostileModel.Auth) {
        let roll = dice.int(0..<100)
        if roll < 72 {
            let spelling = dice.pick(["Bearer ", "Bearer ", "Bearer ", "Bearer  "])
            let trailing = dice.chance(0.1) ? "  " : ""
            return ("token", [("Authorization", Array((spelling + fixture.attacker + trailing).utf8))], .attacker)
        }
        if roll < 94 {
            let wrong = wrongAuth()
            return ("auth " + wrong.label, wrong.headers, .refused)
        }
        let wrong = wrongAuth().headers.first ?? ("Authorization", Array("Bearer x".utf8))
        let valid = ("Authorization", Array(("Bearer " + fixture.attacker).utf8))
        return ("two Authorization headers", dice.chance(0.5) ? [valid, wrong] : [wrong, valid], .unknown)
    }

    func attackerAuth() -> [(String, [UInt8])] {
        [("Authorization", Array(("Bearer " + fixture.attacker).utf8))]
    }

    // MARK: Push bodies

    mutating func victimRecord() -> String {
        dice.pick(fixture.victimPeople + fixture.victimVisits + fixture.victimTombstones)
    }

    /// A push the attacker could really send: own creates, and writes aimed
    /// at other users' records and at catalogs. Valid JSON, valid shape.
    mutating func plausiblePush() -> HostileJSON {
        var seq = Int64(dice.int(1...1_000))
        var mutations: [HostileJSON] = []
        for _ in 0..<dice.int(1...3) {
            seq += Int64(dice.int(1...4))
            mutations.append(plausibleMutation(seq))
        }
        return .object([("client_id", .string(dice.uuid().wireText)), ("mutations", .array(mutations))])
    }

    mutating func plausibleMutation(_ seq: Int64) -> HostileJSON {
        var members: [(String, HostileJSON)] = [("seq", .raw(String(seq))), ("id", .string(dice.uuid().wireText))]
        switch dice.int(0..<6) {
        case 0:
            members += [
                ("op", .string("create")), ("collection", .string("people")), ("uuid", .string(dice.uuid().wireText)),
                ("data", .object([("name", .string("mine " + dice.word(6))), ("section", .raw("4"))])),
            ]
        case 1:
            members += [
                ("op", .string("create")), ("collection", .string("visits")), ("uuid", .string(dice.uuid().wireText)),
                (
                    "data",
                    .object([
                        ("person", .string(dice.pick(fixture.victimPeople))), ("visited_at", .string("2026-05-01T08:00:00Z")),
                    ])
                ),
            ]
        case 2:
            members += [
                ("op", .string("update")), ("collection", .string(dice.pick(["people", "visits"]))),
                ("uuid", .string(victimRecord())), ("data", .object([("name", .string("pwned")), ("notes", .raw("null"))])),
            ]
            if dice.chance(0.5) { members.append(("base_version", .raw(String(dice.int(1...40))))) }
        case 3:
            members += [("op", .string("delete")), ("collection", .string("people")), ("uuid", .string(victimRecord()))]
            if dice.chance(0.5) { members.append(("base_version", .raw(String(dice.int(1...40))))) }
        case 4:
            members += [
                ("op", .string(dice.pick(["create", "update"]))), ("collection", .string("catalogs")),
                ("uuid", .string(dice.pick(fixture.catalogUUIDs))),
                ("data", .object([("catalog", .string("region")), ("code", .string("x")), ("name", .string("pwned"))])),
            ]
        default:
            members += [
                ("op", .string("create")), ("collection", .string("people")),
                ("uuid", .string(dice.pick(fixture.victimPeople))), ("data", .object([("name", .string("clash"))])),
            ]
        }
        return .object(members)
    }

    static let hostileStrings: [String] = [
        "'; DROP TABLE records; --", "' OR '1'='1", "\" OR \"\"=\"", "1; SELECT * FROM tokens", "people--", "../../etc/passwd",
        "%00", "\u{0}", "\u{202E}gnp.exe", "😀🔥", "\u{FEFF}", "\\", "\\u0000", "${jndi:ldap://x}", "<script>alert(1)</script>",
        "Robert'); DROP TABLE Students;--", "\u{FFFF}", "NaN", "null", "SELECT pg_sleep(10)", "a\r\nSet-Cookie: x=y",
    ]

    static let hostileCollections: [String] = [
        "people; DROP TABLE records;--", "people' OR '1'='1", "../catalogs", "PEOPLE", "people\u{0}", "catalogs", "visits",
        "pg_catalog.pg_tables", "sqlite_master", "records", "tokens", " people", "people ", "invoices", "people/../visits",
    ]

    /// Changes that leave the body as broken as it was: extra keys, long or
    /// odd strings, duplicate keys with the same value, SQL-looking names.
    mutating func perturb(_ push: inout HostileJSON) -> String {
        guard case .array(var mutations)? = push.value("mutations"), !mutations.isEmpty else { return "" }
        let index = dice.int(0..<mutations.count)
        var mutation = mutations[index]
        var label = ""
        switch dice.int(0..<10) {
        case 0:
            push.insert(dice.pick(["owner", "team", "user", "role", "__proto__", "admin"]), .string("a-1"), at: dice.int(0...2))
            label = "+extra top key"
        case 1:
            mutation.set(dice.pick(["owner", "team", "version", "deleted", "created_by_user"]), .string("f-1"))
            label = "+extra mutation key"
        case 2:
            let length = dice.pick([1_000, 70_000, 200_000])
            var data = mutation.value("data") ?? .object([])
            data.set(dice.pick(["name", "notes", "phone"]), .string(String(repeating: "x", count: length)))
            mutation.set("data", data)
            label = "+long string \(length)"
        case 3:
            var data = mutation.value("data") ?? .object([])
            data.set(dice.pick(["name", "notes", "owner", "section"]), .string(dice.pick(Self.hostileStrings)))
            mutation.set("data", data)
            label = "+hostile string"
        case 4:
            var data = mutation.value("data") ?? .object([])
            data.set(
                dice.pick(["section", "name", "base_version"]),
                .raw(dice.pick(["1e308", "123456789012345678901234567890", "-9223372036854775809", "-0", "0.1e-400", "1E+2"])))
            mutation.set("data", data)
            label = "+huge number"
        case 5:
            mutation.set("collection", .string(dice.pick(Self.hostileCollections)))
            label = "+hostile collection"
        case 6:
            if let members = mutation.members, let member = members.randomElement(using: &dice.random) {
                mutation.insert(member.0, member.1, at: dice.int(0...members.count))
                label = "+duplicate key \(member.0)"
            }
        case 7:
            if let uuid = mutation.value("uuid")?.stringText { mutation.set("uuid", .string(uuid.uppercased())) }
            label = "+uppercase uuid"
        case 8:
            var data = mutation.value("data") ?? .object([])
            data.set("notes", .string("a\u{0}b\u{1}c"))
            mutation.set("data", data)
            label = "+escaped NUL"
        default:
            push.insert("extra", .array([.object([("nested", .array([.raw("1"), .raw("true"), .raw("null")]))])]), at: 2)
            label = "+unknown nested key"
        }
        mutations[index] = mutation
        push.set("mutations", .array(mutations))
        return label
    }

    static let badUUIDs: [HostileJSON] = [
        .string(""), .string("nope"), .string("0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6"),
        .string("0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b0"), .string("0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6g"),
        .string("{0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b}"), .string("0190a3c45b6d7e8f9a0b1c2d3e4f5a6b"),
        .string("' OR 1=1; DROP TABLE client_seqs; --"), .string(" 0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b"),
        .string("0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6\u{0}"), .raw("12345"), .raw("null"), .raw("true"), .raw("[]"),
        .raw("{}"), .raw("1e999"),
    ]

    static let nonArrays: [HostileJSON] = [.string("all"), .raw("null"), .raw("{}"), .raw("1"), .raw("true"), .raw("{\"0\": {}}")]

    /// One change certain to make the push undecodable (or too large), so it
    /// is refused before any write.
    mutating func breakPush(_ push: inout HostileJSON) -> String {
        guard case .array(var mutations)? = push.value("mutations") else { return "?" }
        switch dice.int(0..<100) {
        case 0..<5:
            push.remove("client_id")
            return "no client_id"
        case 5..<12:
            push.set("client_id", dice.pick(Self.badUUIDs))
            return "bad client_id"
        case 12..<15:
            push.remove("mutations")
            return "no mutations"
        case 15..<20:
            push.set("mutations", dice.pick(Self.nonArrays))
            return "mutations not an array"
        case 20..<26:
            let inner = push
            push = dice.pick([
                .array([inner]), .raw("null"), .raw("42"), .string("push"), .raw("true"), .raw("{}"), .raw("[]"),
                .object([("push", inner)]),
            ])
            return "not a push object"
        case 26..<28:
            var seq = Int64(dice.int(1...100))
            mutations = (0..<501).map { _ in
                seq += 1
                return plausibleMutation(seq)
            }
            push.set("mutations", .array(mutations))
            return "501 mutations"
        case 28..<32:
            var value = HostileJSON.object([("notes", .string("deep"))])
            for _ in 0..<dice.int(33...2_000) { value = dice.chance(0.5) ? .array([value]) : .object([("n", value)]) }
            let index = dice.int(0..<mutations.count)
            var mutation = mutations[index]
            mutation.set("data", value)
            mutations[index] = mutation
            push.set("mutations", .array(mutations))
            return "nested too deep"
        case 32..<36:
            let index = dice.int(0..<mutations.count)
            var mutation = mutations[index]
            mutation.set(
                dice.pick(["collection", "op", "uuid", "id"]),
                .rawString(dice.pick([[0xFF], [0xFE, 0xFF], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0x70, 0x80, 0x70]])))
            mutations[index] = mutation
            push.set("mutations", .array(mutations))
            return "invalid UTF-8 in a string"
        case 36..<39:
            let index = dice.int(0..<mutations.count)
            var mutation = mutations[index]
            mutation.set("op", .rawString(Array("cre".utf8) + [dice.pick([0x00, 0x01, 0x1F, 0x0B])] + Array("ate".utf8)))
            mutations[index] = mutation
            push.set("mutations", .array(mutations))
            return "raw control byte in a string"
        case 39..<41:
            let index = dice.int(0..<mutations.count)
            var mutation = mutations[index]
            mutation.set("collection", .raw(dice.pick([#""\ud800""#, #""people\udfff""#, #""\uZZZZ""#, #""\u12""#, #""\x41""#])))
            mutations[index] = mutation
            push.set("mutations", .array(mutations))
            return "bad string escape"
        default:
            let index = dice.int(0..<mutations.count)
            var mutation = mutations[index]
            let label = breakMutation(&mutation, previous: index > 0 ? mutations[index - 1] : nil)
            mutations[index] = mutation
            push.set("mutations", .array(mutations))
            return label
        }
    }

    mutating func breakMutation(_ mutation: inout HostileJSON, previous: HostileJSON?) -> String {
        let op = mutation.value("op")?.stringText ?? "create"
        switch dice.int(0..<13) {
        case 0:
            let key = dice.pick(["seq", "id", "op", "collection", "uuid"])
            mutation.remove(key)
            return "mutation without \(key)"
        case 1:
            mutation.set(
                "seq",
                .raw(
                    dice.pick([
                        "\"1\"", "true", "null", "[]", "{}", "1.5", "0.5", "0", "-1", "-9223372036854775808", "-0",
                        "9223372036854775808", "1e19", "18446744073709551616", "1e400", "-1e3", "\"\"",
                    ])))
            return "bad seq"
        case 2:
            if let previous, let seq = previous.value("seq") {
                if dice.chance(0.5) {
                    mutation.set("seq", seq)
                    return "duplicate seq"
                }
                if case .raw(let text) = seq, let value = Int64(text) {
                    mutation.set("seq", .raw(String(value - Int64(dice.int(1...3)))))
                    return "decreasing seq"
                }
            }
            mutation.set("seq", .raw("0"))
            return "seq 0"
        case 3:
            mutation.set(
                "op",
                dice.pick([
                    .string("explode"), .string("CREATE"), .string("Create"), .string(""), .string(" create"),
                    .string("create\u{0}"), .string("upsert"), .string("drop"), .string("delete;--"), .raw("1"),
                    .raw("null"), .raw("[\"create\"]"), .string("crеate"),
                ]))
            return "unknown op"
        case 4:
            mutation.set("collection", dice.pick([.string(""), .raw("5"), .raw("null"), .raw("[]"), .raw("{}"), .raw("false")]))
            return "collection not a name"
        case 5:
            mutation.set(dice.pick(["uuid", "id"]), dice.pick(Self.badUUIDs))
            return "bad uuid or id"
        case 6:
            if op == "delete" {
                mutation.set("data", dice.pick([.object([]), .object([("name", .string("x"))]), .raw("[]"), .raw("0")]))
                return "delete with data"
            }
            if dice.chance(0.4) {
                mutation.remove("data")
                return "\(op) without data"
            }
            mutation.set("data", dice.pick([.raw("null"), .raw("[]"), .string("data"), .raw("5"), .raw("true"), .raw("[{}]")]))
            return "data not an object"
        case 7:
            if op == "create" {
                mutation.set("base_version", .raw(String(dice.int(0...99))))
                return "create with base_version"
            }
            mutation.set("base_version", .raw(dice.pick(["\"5\"", "1.5", "true", "[]", "9223372036854775808", "{}", "1e30"])))
            return "bad base_version"
        case 8:
            mutation = dice.pick([.raw("[]"), .raw("null"), .string("mutation"), .raw("5"), .array([mutation])])
            return "mutation not an object"
        case 9:
            let number = dice.pick(["NaN", "Infinity", "-Infinity", "undefined", "0x10", "01", "+1", ".5", "1.", "'x'"])
            mutation.set("data", .object([("name", .string("x")), ("notes", .raw(number))]))
            return "not a JSON number"
        case 10:
            mutation.set("op", .raw("\"create"))
            return "unterminated string"
        case 11:
            mutation.set("uuid", .raw("/* comment */ \"\(dice.uuid().wireText)\""))
            return "comment in JSON"
        default:
            mutation.set("data", .raw("{\"name\": \"x\" \"notes\": \"y\"}"))
            return "missing comma"
        }
    }

    /// Encoding faults certain to make any body invalid.
    mutating func breakBytes(_ body: inout [UInt8]) -> String {
        switch dice.int(0..<7) {
        case 0:
            body = Array(body.prefix(dice.int(0..<max(1, body.count))))
            return "truncated"
        case 1:
            let bad: [[UInt8]] = [[0xFF], [0xFE], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xF8, 0x88, 0x80, 0x80, 0x80]]
            body.insert(contentsOf: dice.pick(bad), at: dice.int(0...body.count))
            return "invalid UTF-8"
        case 2:
            body.insert(dice.pick([0x00, 0x01, 0x07, 0x0B, 0x0C, 0x1B, 0x1F]), at: dice.int(0...body.count))
            return "raw control byte"
        case 3:
            body += Array(dice.pick(["x", "}", "]", "{}", "[]", "\"", "null", "0", "{\"client_id\":1}", ",{}"]).utf8)
            return "trailing garbage"
        case 4:
            body += body
            return "body twice"
        case 5:
            if !body.isEmpty { body[dice.int(0..<body.count)] = dice.pick([0xFF, 0x00, 0x02]) }
            return "byte replaced"
        default:
            if body.first == UInt8(ascii: "{") { body.removeFirst() } else { body = [] }
            return "no opening brace"
        }
    }

    /// The body of a broken push, and the label of what broke it.
    mutating func brokenPushBody() -> ([UInt8], String) {
        var push = plausiblePush()
        var labels: [String] = []
        for _ in 0..<dice.int(0...2) { labels.append(perturb(&push)) }
        labels.insert(breakPush(&push), at: 0)
        var body = push.bytes
        if dice.chance(0.1) {
            body = Array(dice.pick(["\u{FEFF}", " \n\t", "\r\n"]).utf8) + body
            labels.append("+leading bytes")
        }
        if dice.chance(0.15) { labels.append("+" + breakBytes(&body)) }
        return (body, labels.filter { !$0.isEmpty }.joined(separator: " "))
    }

    static let goodContentTypes = [
        "application/json", "application/json", "application/json", "application/json; charset=utf-8", "APPLICATION/JSON",
        "application/json;charset=latin1",
    ]

    mutating func pushTarget() -> [UInt8] {
        Array(dice.pick(["/v1/push", "/v1/push", "/v1/push", "/v1/push", "/v1/push?client_id=x&seq=1", "/v1/push?"]).utf8)
    }

    mutating func brokenPush() -> HostileRequest {
        let (body, label) = brokenPushBody()
        var headers = attackerAuth()
        if !dice.chance(0.1) { headers.append(("Content-Type", Array(dice.pick(Self.goodContentTypes).utf8))) }
        if dice.chance(0.03) { headers.append(("Expect", Array("100-continue".utf8))) }
        return HostileRequest(
            label: "push: " + label, method: "POST", target: pushTarget(), headers: headers, body: body,
            chunked: dice.chance(0.05), expect: .refused)
    }

    /// A valid push, made invalid only by an encoding fault: were the fault
    /// tolerated, the attacker's own create would land and the snapshot
    /// would show it.
    mutating func byteBrokenPush() -> HostileRequest {
        var body = plausiblePush().bytes
        let label = breakBytes(&body)
        return HostileRequest(
            label: "valid push, " + label, method: "POST", target: Array("/v1/push".utf8),
            headers: attackerAuth() + [("Content-Type", Array("application/json".utf8))], body: body, expect: .refused)
    }

    mutating func wrongContentTypePush() -> HostileRequest {
        let type = dice.pick([
            "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=xyz", "application/xml",
            "text/json", "json", "application/jso", "text/html; application/json", "*/*", "application/x-json",
        ])
        return HostileRequest(
            label: "valid push as \(type)", method: "POST", target: Array("/v1/push".utf8),
            headers: attackerAuth() + [("Content-Type", Array(type.utf8))], body: plausiblePush().bytes, expect: .refused)
    }

    mutating func unauthenticatedPush() -> HostileRequest {
        let wrong = wrongAuth()
        let (body, label) = dice.chance(0.6) ? (plausiblePush().bytes, "valid push") : brokenPushBody()
        return HostileRequest(
            label: "\(label) with auth \(wrong.label)", method: "POST", target: Array("/v1/push".utf8),
            headers: wrong.headers + [("Content-Type", Array("application/json".utf8))], body: body, expect: .refused)
    }

    /// Empty bodies, no body at all, oversized bodies, the wrong method with a valid body.
    mutating func oddPushTransport() -> HostileRequest {
        var headers = attackerAuth() + [("Content-Type", Array("application/json".utf8))]
        let push = Array("/v1/push".utf8)
        switch dice.int(0..<6) {
        case 0:
            return HostileRequest(label: "push with an empty body", method: "POST", target: push, headers: headers, body: [], expect: .refused)
        case 1:
            return HostileRequest(label: "push without a body", method: "POST", target: push, headers: headers, body: nil, expect: .refused)
        case 2 where hugeBodies < 3:
            hugeBodies += 1
            var json = plausiblePush()
            json.set("padding", .string(String(repeating: "p", count: 4 * 1024 * 1024 + dice.int(1...1000))))
            return HostileRequest(
                label: "push over 4 MiB", method: "POST", target: push, headers: headers, body: json.bytes,
                chunked: hugeBodies == 2, expect: .refused)
        case 3:
            let method = dice.pick(["GET", "PUT", "PATCH", "DELETE", "OPTIONS", "post", "Post"])
            return HostileRequest(
                label: "valid push by \(method)", method: method, target: push, headers: headers,
                body: plausiblePush().bytes, expect: .refused)
        case 4:
            headers.append(("Content-Type", Array("text/plain".utf8)))
            return HostileRequest(
                label: "broken push with two content types", method: "POST", target: push,
                headers: dice.chance(0.5) ? headers : headers.reversed(), body: brokenPushBody().0, expect: .refused)
        default:
            let (body, label) = brokenPushBody()
            return HostileRequest(
                label: "chunked push: " + label, method: "POST", target: push, headers: headers, body: body, chunked: true,
                expect: .refused)
        }
    }

    // MARK: Reads

    enum Endpoint { case pull, search, scope, health, record, mutation }

    /// Percent-encodes every byte but the unreserved ones (decoded exactly by any server).
    static func encode(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.append(byte)
            default: out += Array(String(format: "%%%02X", byte).utf8)
            }
        }
        return out
    }

    /// A value as it goes on the wire: usually cleanly encoded, sometimes
    /// with garbage escapes, raw bytes above 0x7F, `+`, or a NUL escape.
    mutating func wire(_ text: String) -> [UInt8] {
        switch dice.int(0..<20) {
        case 0: return Self.encode(text) + Array(dice.pick(["%", "%z", "%zz", "%4", "%%", "%u0041", "%G0"]).utf8)
        case 1: return Self.encode(text) + [0xFF, 0xFE]
        case 2: return Self.encode(text) + Array("%00".utf8) + Self.encode(dice.pick(["junk", "' OR 1=1", "x"]))
        case 3: return Array(text.utf8.filter { $0 > 0x20 && $0 != UInt8(ascii: "#") && $0 != UInt8(ascii: "&") && $0 != 0x7F })
        case 4: return Self.encode(text).map { $0 == UInt8(ascii: "-") ? UInt8(ascii: "+") : $0 }
        default: return Self.encode(text)
        }
    }

    static let sqlNames = [
        "people;DROP TABLE records", "' OR 1=1 --", "people' UNION SELECT hash FROM tokens--", "PEOPLE", "people ", "records",
        "sqlite_master", "../people", "people,invoices", "invoices", "catalogs\"", "pg_sleep(5)", "people%", "*", "people)--",
    ]

    mutating func collectionsValue() -> String {
        if dice.chance(0.5) {
            return dice.pick(["people", "visits", "catalogs", "visits,people", "", ",", "people,,visits", "people,people,catalogs"])
        }
        if dice.chance(0.1) { return String(repeating: "people,", count: dice.int(100...600)) + "x" }
        return dice.pick(Self.sqlNames)
    }

    mutating func limitValue(max: Int) -> String {
        dice.pick([
            "1", String(max), "17", "+7", "0005", "0", "-1", String(max + 1), "99999999999999999999", "abc", "1e3", "1.5",
            " 5", "-0", "0x10", "", "9223372036854775807", "-9223372036854775808", "' OR 1=1",
        ])
    }

    mutating func cursorValue() -> String {
        switch dice.int(0..<10) {
        case 0, 1: return dice.pick(fixture.validCursors)
        case 2: return dice.pick(fixture.foreignCursors)
        case 3: return Data("v1.-1.\(dice.word(12))".utf8).base64EncodedString()
        case 4: return Data("v2.0.abc".utf8).base64EncodedString()
        case 5: return dice.pick(fixture.validCursors) + dice.pick(["x", "=", "==", "A"])
        case 6: return String(repeating: "QUFB", count: dice.int(33...400))
        case 7: return dice.pick(["", "====", "-_-_", "\u{0}", "eyJ2IjoxfQ"])
        default: return dice.pick(Self.sqlNames + Self.hostileStrings)
        }
    }

    mutating func timeValue() -> String {
        dice.pick(Array(HostileModel.validTimes).sorted() + Array(HostileModel.invalidTimes).sorted())
    }

    mutating func searchText() -> String {
        switch dice.int(0..<12) {
        case 0: return dice.pick(fixture.victimSecrets)
        case 1: return dice.pick(fixture.victimPeople)
        case 2: return ""
        case 3: return String(repeating: "a", count: dice.pick([200, 201, 1000]))
        case 4: return String(repeating: "é", count: dice.pick([100, 101]))
        case 5: return dice.pick(["%", "_", "\\", "%%", "\\%", "%' OR 1=1 --", "*", "district", "a", "[a-z]", "'"])
        default: return dice.pick(Self.hostileStrings + Self.sqlNames)
        }
    }

    /// `name=value` pieces for an endpoint, with junk, repeats and missing values.
    mutating func query(for endpoint: Endpoint) -> [UInt8] {
        var pieces: [[UInt8]] = []
        func add(_ name: String, _ value: String) { pieces.append(Self.encode(name) + [UInt8(ascii: "=")] + wire(value)) }
        switch endpoint {
        case .pull:
            if dice.chance(0.6) { add("collections", collectionsValue()) }
            if dice.chance(0.5) { add("limit", limitValue(max: 5000)) }
            if dice.chance(0.4) { add("cursor", cursorValue()) }
            if dice.chance(0.2) { add("window_start", timeValue()) }
        case .search:
            if dice.chance(0.9) {
                add("collection", dice.chance(0.7) ? dice.pick(["people", "visits", "catalogs"]) : dice.pick(Self.sqlNames))
            }
            if dice.chance(0.9) { add("q", searchText()) }
            if dice.chance(0.4) { add("limit", limitValue(max: 200)) }
        case .scope:
            if dice.chance(0.5) { add("window_start", timeValue()) }
        default: break
        }
        for _ in 0..<dice.int(0...2) {
            switch dice.int(0..<6) {
            case 0:
                add(
                    dice.pick(["foo", "__proto__", "limit[]", "collections[]", "user", "role", "owner", "LIMIT"]),
                    dice.pick(Self.hostileStrings))
            case 1: pieces.append(Array(dice.pick(["limit", "q", "cursor", "collections", "collection", "window_start"]).utf8))
            case 2: pieces.append(Array(dice.pick(["", "=", "==x", "&", "=people"]).utf8))
            case 3:
                // Repeated names: the model lets the last one win.
                if let first = pieces.first { pieces.append(first) }
                add(dice.pick(["limit", "q", "collection", "collections", "cursor"]), dice.pick(["5", "people", "abc", ""]))
            default: pieces.append(Array(dice.pick(["%zz=1", "a=%", "%00=1", "x=%FF%FE", "q%3D=people"]).utf8))
            }
        }
        pieces.shuffle(using: &dice.random)
        return Array(pieces.joined(separator: [UInt8(ascii: "&")]))
    }

    /// Path segments of an endpoint, with traversal and encoding tricks.
    mutating func pathSegments(for endpoint: Endpoint) -> [[UInt8]] {
        var segments: [String]
        switch endpoint {
        case .pull: segments = ["v1", "pull"]
        case .search: segments = ["v1", "search"]
        case .scope: segments = ["v1", "scope"]
        case .health: segments = ["v1", "health"]
        case .mutation:
            let id = dice.pick(
                fixture.victimMutationIDs + [
                    dice.uuid().wireText, "' OR 1=1 --", "not-a-uuid", "", "*", "00000000-0000-0000-0000-000000000000",
                ])
            segments = ["v1", "mutations", dice.chance(0.2) ? id.uppercased() : id]
        case .record:
            let collection = dice.chance(0.8) ? dice.pick(["people", "visits", "catalogs"]) : dice.pick(Self.sqlNames)
            var uuid: String
            switch dice.int(0..<10) {
            case 0..<4: uuid = victimRecord()
            case 4..<7: uuid = dice.pick(fixture.catalogUUIDs)
            case 7: uuid = dice.uuid().wireText
            default:
                uuid = dice.pick(["not-a-uuid", "", "' OR '1'='1", "../../etc/passwd", "*", "%", String(repeating: "0", count: 36)])
            }
            if dice.chance(0.2) { uuid = uuid.uppercased() }
            segments = ["v1", "records", collection, uuid]
        }
        var encoded = segments.map { Array($0.utf8) }
        switch dice.int(0..<14) {
        case 0: encoded.insert(Array(dice.pick(["..", ".", "", "%2e%2e", "v1"]).utf8), at: dice.int(1...encoded.count))
        case 1: encoded[encoded.count - 1] = segments[segments.count - 1].utf8.flatMap { Array(String(format: "%%%02x", $0).utf8) }
        case 2:
            encoded[dice.int(0..<encoded.count)] += Array(dice.pick(["%00", "%2F", "%2f..", "%", "%zz", ";x", "%20"]).utf8)
        case 3: encoded[dice.int(0..<encoded.count)] += [0xFF, 0xC0, 0xAF]
        case 4: encoded.append(Array(dice.pick(["", "..", "x", "assign"]).utf8))
        case 5: encoded[0] = Array(dice.pick(["V1", "v2", "v1.0", "%76%31", "v1%2F"]).utf8)
        default: break
        }
        return encoded
    }

    mutating func read(_ endpoint: Endpoint) -> HostileRequest {
        let segments = pathSegments(for: endpoint)
        var target = [UInt8(ascii: "/")] + Array(segments.joined(separator: [UInt8(ascii: "/")]))
        if dice.chance(0.04) { target = [UInt8(ascii: "/")] + target }
        let query = query(for: endpoint)
        if !query.isEmpty || dice.chance(0.05) { target += [UInt8(ascii: "?")] + query }
        var authLabel = "no auth"
        var headers: [(String, [UInt8])] = []
        var auth = HostileModel.Auth.refused
        if endpoint != .health || dice.chance(0.5) {
            let chosen = someAuth()
            (authLabel, headers, auth) = (chosen.label, chosen.headers, chosen.auth)
        }
        if dice.chance(0.05) { headers.append(("X-Forwarded-For", Array("' OR 1=1 --".utf8))) }
        if dice.chance(0.03) { headers.append(("X-User", Array("a-1".utf8))) }
        let body: [UInt8]? = dice.chance(0.03) ? plausiblePush().bytes : nil
        return HostileRequest(
            label: "\(endpoint) (\(authLabel))", method: "GET", target: target, headers: headers, body: body,
            expect: model.expect(method: "GET", target: target, auth: auth))
    }

    /// Assignments by the attacker (a field user: never allowed).
    mutating func assign() -> HostileRequest {
        var segments = pathSegments(for: .record)
        segments.append(Array("assign".utf8))
        let target = [UInt8(ascii: "/")] + Array(segments.joined(separator: [UInt8(ascii: "/")]))
        let body: [UInt8]
        switch dice.int(0..<4) {
        case 0: body = Array(#"{"owner": "x-9", "team": "t-9"}"#.utf8)
        case 1: body = Array(#"{"owner": "f-1", "team": "t-1"}"#.utf8)
        case 2: body = brokenPushBody().0
        default:
            body = Array(
                dice.pick([
                    #"{"owner": "", "team": ""}"#, #"{"owner": null}"#, #"[]"#, #"{"owner": "x\u0000", "team": "t"}"#,
                    #"{"owner": 1, "team": 2}"#, "{", "", #"{"owner": "' OR 1=1 --", "team": "'; DROP TABLE records; --"}"#,
                ]).utf8)
        }
        let auth = someAuth()
        let method = dice.chance(0.85) ? "POST" : dice.pick(["GET", "PUT", "DELETE", "PATCH"])
        return HostileRequest(
            label: "assign by \(method) (\(auth.label))", method: method, target: target,
            headers: auth.headers + [("Content-Type", Array("application/json".utf8))], body: body,
            expect: model.expect(method: method, target: target, auth: auth.auth))
    }

    /// Assignments by an administrator that cannot apply: a body that is not
    /// a valid assignment (on any record, other users' included), or a valid
    /// one aimed at a catalog, a record that does not exist, an unknown
    /// collection or a malformed id.
    mutating func adminAssign() -> HostileRequest {
        let invalidBody = dice.chance(0.6)
        var collection = dice.pick(["people", "visits"])
        var uuid: String
        let body: [UInt8]
        if invalidBody {
            uuid = victimRecord()
            if dice.chance(0.2) { uuid = uuid.uppercased() }
            body = Array(
                dice.pick([
                    #"{"owner": "", "team": "t-9"}"#, #"{"owner": "x-9", "team": ""}"#, #"{"owner": "x-9"}"#, #"{"team": "t-9"}"#,
                    #"{"owner": null, "team": "t-9"}"#, #"{"owner": 9, "team": "t-9"}"#, #"{"owner": ["x-9"], "team": "t-9"}"#,
                    "[]", "null", #"{"owner": "x-9", "team": "t-9""#, #"{"owner": "x-9", "team": "t-9"}x"#, "",
                    #"{"owner": "\#(String(repeating: "o", count: 201))", "team": "t-9"}"#,
                    #"{"owner": "x-9", "team": "\#(String(repeating: "t", count: 5_000))"}"#,
                    #"{"owner": "\ud800", "team": "t-9"}"#,
                ]).utf8)
        } else {
            switch dice.int(0..<4) {
            case 0:
                collection = "catalogs"
                uuid = dice.pick(fixture.catalogUUIDs)
            case 1: uuid = dice.uuid().wireText
            case 2:
                collection = dice.pick(Self.sqlNames)
                uuid = dice.pick(fixture.victimPeople)
            default: uuid = dice.pick(["not-a-uuid", "' OR 1=1 --", String(dice.pick(fixture.victimPeople).dropLast())])
            }
            body = Array(#"{"owner": "x-9", "team": "t-9"}"#.utf8)
        }
        let target =
            Array("/v1/records/".utf8) + Self.encode(collection) + [UInt8(ascii: "/")] + Self.encode(uuid)
            + Array("/assign".utf8)
        let admin = [("Authorization", Array(("Bearer " + fixture.admin).utf8))]
        return HostileRequest(
            label: "admin assign (\(invalidBody ? "invalid body" : "no such writable record"))", method: "POST",
            target: target, headers: admin + [("Content-Type", Array("application/json".utf8))], body: body,
            expect: .refused)
    }

    static let oddMethods = [
        "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "TRACE", "get", "Get", "FOO", "PROPFIND", "MKCOL", "LOCK",
        "M-SEARCH", "BREW", "POST",
    ]

    mutating func oddMethod() -> HostileRequest {
        let endpoint = dice.pick([Endpoint.pull, .search, .scope, .health, .record, .mutation])
        let segments = pathSegments(for: endpoint)
        let target = [UInt8(ascii: "/")] + Array(segments.joined(separator: [UInt8(ascii: "/")]))
        let method = dice.pick(Self.oddMethods)
        let body: [UInt8]? = dice.chance(0.5) ? brokenPushBody().0 : nil
        return HostileRequest(
            label: "\(method) on \(endpoint)", method: method, target: target, headers: attackerAuth(), body: body,
            expect: model.expect(method: method, target: target, auth: .attacker))
    }

    // MARK: The console

    static let consoleTargets = [
        "/admin/api/session", "/admin/api/records?collection=people&q=ana", "/admin/api/records?collection=tokens",
        "/admin/api/records/people/0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b",
        "/admin/api/records/people/0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b/assign", "/admin/api/devices?sort=silent",
        "/admin/api/problems?kind=rejected", "/admin/api/tokens",
        "/admin/api/tokens/0000000000000000000000000000000000000000000000000000000000000000/revoke",
        "/admin/api/activity", "/admin/api/blobs/0000000000000000000000000000000000000000000000000000000000000000",
        "/admin/api/", "/admin/api/../api/tokens", "/admin/api/session/x", "/admin/console.js/x", "/admin/../v1/push",
    ]

    /// A console API call from someone with no session: no cookie, a
    /// forged or replayed-looking one, a field token where the cookie goes,
    /// a wrong CSRF token, another site's Origin, or a sign-in with the
    /// attacker's (field) token. Every one is refused and changes nothing.
    mutating func consoleRequest() -> HostileRequest {
        let target = dice.pick(Self.consoleTargets)
        let method = dice.pick(["GET", "GET", "POST", "POST", "DELETE", "PUT"])
        var headers: [(String, [UInt8])] = [("Content-Type", Array("application/json".utf8))]
        let cookies = [
            "", "outpost_console=", "outpost_console=forged-value", "outpost_console=\(fixture.attacker)",
            "outpost_console=\(String(repeating: "A", count: 43))", "other=1; outpost_console=x; outpost_console=y",
        ]
        let cookie = dice.pick(cookies)
        if !cookie.isEmpty { headers.append(("Cookie", Array(cookie.utf8))) }
        if dice.chance(0.5) { headers.append(("X-CSRF-Token", Array(dice.pick(["", "x", fixture.attacker]).utf8))) }
        if dice.chance(0.3) { headers.append(("Origin", Array(dice.pick(["https://evil.example", "null"]).utf8))) }
        if dice.chance(0.3) { headers += attackerAuth() }
        var body: [UInt8]?
        if method != "GET" {
            body = Array(
                dice.pick([
                    #"{"token": "\#(fixture.attacker)"}"#, #"{"token": ""}"#, #"{"token": 1}"#, "{", #"{"owner": "x", "team": "y"}"#,
                    #"{"user": "mallory", "role": "admin", "team": "hq"}"#,
                ]).utf8)
        }
        return HostileRequest(
            label: "console \(method) \(target.prefix(40))", method: method, target: Array(target.utf8), headers: headers,
            body: body, expect: .refused)
    }

    static let unknownTargets = [
        "/", "/v1", "/v1/", "/v2/pull", "/V1/health", "/v1/Health", "/v1/health/", "/v1//health", "/v1/push/", "/v1/pull/x",
        "/v1/records", "/v1/records/people", "/v1/records/people/0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b/x",
        "/v1/records/people/0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b/assign/x", "/v1/search/x", "/v1/mutations",
        "/v1/mutations/0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b/x", "/admin", "/.env", "/../../../../etc/passwd",
        "/v1/../../etc/passwd", "/v1/./health", "/v1/health/.", "/v1/health;x", "/v1/scope/..", "/v1/records/../tokens",
        "/v1/%2e%2e/%2e%2e/etc/passwd", "/v1/records/people/..%2F..%2Ftokens", "/static/../v1/push", "/v1/tokens",
        "/v1/records/tokens/0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b",
        "/v1/records/sqlite_master/0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b", "/v1/push%00", "/v1/pu%73h/x", "/v1/healt",
        "/v1/health%2F", "/%2Fv1/health", "v1/health", "*", "http://127.0.0.1/v1/push",
    ]

    mutating func unknownPath() -> HostileRequest {
        var target: [UInt8]
        if dice.chance(0.1) {
            target = Array(("/v1/" + String(repeating: dice.pick(["a", "../", "%2e", "records/"]), count: dice.int(200...900))).utf8)
        } else if dice.chance(0.1) {
            target = Array("/v1/".utf8) + [0xFF, 0xFE, 0x80] + Array("/health".utf8)
        } else {
            target = Array(dice.pick(Self.unknownTargets).utf8)
        }
        let method = dice.chance(0.6) ? "GET" : dice.pick(Self.oddMethods)
        let expect: HostileRequest.Expect
        if target.first != UInt8(ascii: "/") {
            // Not origin-form: the HTTP layer may map it back to a route, or not.
            expect = method == "GET" ? .either : .refused
        } else {
            expect = model.expect(method: method, target: target, auth: .attacker)
        }
        let body: [UInt8]? = method == "GET" || dice.chance(0.5) ? nil : brokenPushBody().0
        return HostileRequest(
            label: "\(method) unknown path", method: method, target: target,
            headers: attackerAuth() + [("Content-Type", Array("application/json".utf8))], body: body, expect: expect)
    }
}

// MARK: - Checking answers

/// Collects the verdicts from the sending threads.
final class HostileLedger: @unchecked Sendable {
    // @unchecked Sendable: every stored property is only touched while `lock` is held.
    private let lock = NSLock()
    private var failures: [(Int, String)] = []
    private var statuses: [Int: Int] = [:]
    private var accepted = 0
    private var refused = 0

    func record(_ index: Int, _ request: HostileRequest, _ reply: Result<HostileSocket.Reply, any Error>, secrets: [String]) {
        let verdict = Self.check(request, reply, secrets: secrets)
        lock.lock()
        defer { lock.unlock() }
        if case .success(let reply) = reply {
            statuses[reply.status, default: 0] += 1
            if (200..<300).contains(reply.status) { accepted += 1 } else { refused += 1 }
        }
        if let verdict { failures.append((index, "#\(index) \(request.label): \(verdict)\n    request: \(request.excerpt)")) }
    }

    func summary() -> (failures: [String], statuses: String, accepted: Int, refused: Int) {
        lock.lock()
        defer { lock.unlock() }
        let histogram = statuses.keys.sorted().map { "\($0)×\(statuses[$0]!)" }.joined(separator: " ")
        return (failures.sorted { $0.0 < $1.0 }.map(\.1), histogram, accepted, refused)
    }

    /// Nil when the answer keeps every rule; otherwise what is wrong.
    static func check(_ request: HostileRequest, _ result: Result<HostileSocket.Reply, any Error>, secrets: [String]) -> String? {
        let reply: HostileSocket.Reply
        switch result {
        case .failure(let error): return "no answer (\(error))"
        case .success(let value): reply = value
        }
        let text = String(decoding: reply.body, as: UTF8.self)
        let shown = "\(reply.status) \(text.prefix(300))"
        if reply.status >= 500 { return "server error: \(shown)" }
        let success = (200..<300).contains(reply.status)
        guard success || (400..<500).contains(reply.status) else { return "neither 2xx nor 4xx: \(shown)" }
        switch request.expect {
        case .refused where success: return "accepted a request that is not valid: \(shown)"
        case .accepted where !success: return "refused a valid request: \(shown)"
        default: break
        }
        if request.method != "HEAD" {
            // The console's page, style and script are the one kind of 2xx that is not JSON.
            let consoleAsset = request.target.starts(with: Array("/admin".utf8)) && !request.target.starts(with: Array("/admin/api".utf8))
            if success {
                guard consoleAsset || (try? JSONValue.parse(Data(reply.body))) != nil else {
                    return "2xx without a JSON body: \(shown)"
                }
            } else {
                guard reply.headers["content-type"]?.hasPrefix("application/json") == true else {
                    return "error answer not application/json: \(shown)"
                }
                guard let error = try? WireCoding.decode(ErrorBody.self, from: Data(reply.body)) else {
                    return "4xx without the error body: \(shown)"
                }
                if error.message.isEmpty || error.code.rawValue.isEmpty { return "empty error code or message: \(shown)" }
                if error.code.httpStatus != reply.status { return "code \(error.code) with status \(reply.status)" }
            }
        }
        // No other user's data, unless the request itself carried it.
        let sent = String(decoding: request.target + (request.body ?? []), as: UTF8.self).lowercased()
        let answer = text.lowercased()
        for secret in secrets where answer.contains(secret.lowercased()) && !sent.contains(secret.lowercased()) {
            return "answer carries another user's data (\(secret)): \(shown)"
        }
        return nil
    }
}

// MARK: - Sending raw bytes

/// A minimal HTTP/1.1 client on a POSIX socket: sends exactly the bytes it
/// is given (invalid UTF-8, odd methods, duplicate headers) and reads the
/// answer until the server closes the connection (`Connection: close`).
enum HostileSocket {
    struct Reply: Sendable {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// A socket connected to `127.0.0.1:port`, with send and receive timeouts.
    static func connected(port: UInt16, timeoutSeconds: Int = 30) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket() failed: errno \(errno)") }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw Failure(description: "connect() failed: errno \(errno)")
        }
        return fd
    }

    /// Sends all of `bytes`, or as much as the peer takes before it stops reading.
    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let sent = send(fd, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
                if sent > 0 {
                    offset += sent
                } else if sent < 0 && errno == EINTR {
                    continue
                } else {
                    break
                }
            }
        }
    }

    static func exchange(port: UInt16, request: [UInt8], timeoutSeconds: Int = 30) throws -> Reply {
        let fd = try connected(port: port, timeoutSeconds: timeoutSeconds)
        defer { close(fd) }
        // A server may answer (413) before reading everything: stop sending then, and read.
        sendAll(fd, request)
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                received += chunk[0..<count]
            } else if count == 0 {
                break
            } else if errno == EINTR {
                continue
            } else if errno == ECONNRESET && !received.isEmpty {
                break
            } else {
                throw Failure(description: "recv() failed after \(received.count) bytes: errno \(errno)")
            }
        }
        return try parse(received)
    }

    static func parse(_ bytes: [UInt8]) throws -> Reply {
        var rest = bytes[...]
        while true {
            guard let end = find([13, 10, 13, 10], in: rest) else {
                throw Failure(description: "incomplete answer: \(String(decoding: bytes.prefix(200), as: UTF8.self).debugDescription)")
            }
            let head = String(decoding: rest[rest.startIndex..<end], as: UTF8.self)
            rest = rest[(end + 4)...]
            let lines = head.components(separatedBy: "\r\n")
            let statusParts = lines[0].split(separator: " ")
            guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/1."), let status = Int(statusParts[1]) else {
                throw Failure(description: "bad status line: \(lines[0].debugDescription)")
            }
            // Interim answers (100 Continue) come before the real one.
            if (100..<200).contains(status) { continue }
            var headers: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            var body = Array(rest)
            if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
                body = dechunk(body)
            } else if let length = headers["content-length"].flatMap(Int.init), length < body.count {
                body = Array(body.prefix(length))
            }
            return Reply(status: status, headers: headers, body: body)
        }
    }

    static func find(_ needle: [UInt8], in haystack: ArraySlice<UInt8>) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        var index = haystack.startIndex
        while index + needle.count <= haystack.endIndex {
            if haystack[index..<index + needle.count].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }

    static func dechunk(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var rest = bytes[...]
        while let lineEnd = find([13, 10], in: rest),
            let size = Int(String(decoding: rest[rest.startIndex..<lineEnd], as: UTF8.self).split(separator: ";").first ?? "", radix: 16),
            size > 0, lineEnd + 2 + size <= rest.endIndex
        {
            out += rest[(lineEnd + 2)..<(lineEnd + 2 + size)]
            rest = rest[min(rest.endIndex, lineEnd + 2 + size + 2)...]
        }
        return out
    }
}

/// Sends requests on `width` threads of its own (blocking sockets must not
/// tie up the cooperative pool), each taking the next request until none remain.
enum HostileRunner {
    final class Queue: @unchecked Sendable {
        // @unchecked Sendable: `next` is only touched while `lock` is held.
        private let lock = NSLock()
        private var next = 0
        let count: Int
        init(count: Int) { self.count = count }

        func take() -> Int? {
            lock.lock()
            defer { lock.unlock() }
            guard next < count else { return nil }
            next += 1
            return next - 1
        }
    }

    static func run(
        _ requests: [HostileRequest], width: Int, _ handle: @escaping @Sendable (Int, HostileRequest) -> Void
    ) async {
        let queue = Queue(count: requests.count)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let group = DispatchGroup()
            for _ in 0..<width {
                group.enter()
                let thread = Thread {
                    while let index = queue.take() { handle(index, requests[index]) }
                    group.leave()
                }
                thread.start()
            }
            group.notify(queue: .global()) { done.resume() }
        }
    }
}
