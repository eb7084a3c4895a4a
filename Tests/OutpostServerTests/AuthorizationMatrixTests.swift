import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// Invariant I7 as a matrix: every role and user × every endpoint × every
/// record (other users', other teams', catalogs), against a live server on
/// each backend. Each answer is checked for the exact visibility the protocol
/// gives (field: own; coordinator: own team; admin: all; catalogs: readable
/// by all, writable by none), and every raw body is searched for the ids and
/// data of records outside the caller's scope. Zero leaks, and no write
/// attempt changes another user's record.
@Suite("Authorization matrix", .timeLimit(.minutes(5)))
struct AuthorizationMatrixTests {
    @Test(arguments: Backend.available)
    func everyRoleEveryEndpointEveryRecord(_ backend: Backend) async throws {
        let started = ContinuousClock.now
        let live = try LiveServer(backend)
        var world = try await MatrixWorld.build(live)
        var tally = MatrixTally()

        for caller in world.callers {
            try await world.checkReads(of: caller, live, &tally)
        }
        let before = try MatrixWorld.records(live)
        for caller in world.callers {
            try await world.checkWrites(of: caller, live, &tally)
        }
        // After every write attempt: no record that existed changed, and the
        // only new ones are the visits callers were allowed to create.
        let after = try MatrixWorld.records(live)
        for (uuid, row) in before {
            tally.expect(after[uuid] == row, "the record \(uuid) changed after the write attempts")
        }
        let added = Set(after.keys).subtracting(before.keys)
        tally.expect(added == world.allowedCreates, "new records: \(added.sorted()) expected \(world.allowedCreates.sorted())")
        let exits = try live.database.read { try $0.query("SELECT COUNT(*) FROM scope_exits", []) }
        tally.expect(exits.first?.int(0) == 0, "a write attempt moved a record out of someone's scope")

        print(
            "AuthorizationMatrix[\(backend.rawValue)]: \(world.callers.count) callers × \(world.records.count) records: \(tally.requests) requests, \(tally.checks) checks, \(tally.bodyScans) body scans, \(tally.leaks.count) leaks, \(tally.failures.count) failures in \(ContinuousClock.now - started)"
        )
        #expect(tally.requests > 1_000)
        #expect(tally.leaks.isEmpty, "\(tally.leaks.count) answers carried records outside the caller's scope")
        #expect(tally.failures.isEmpty, "\(tally.failures.count) answers broke the expected visibility")
        for leak in tally.leaks.prefix(20) { Issue.record(Comment(rawValue: "leak: " + leak)) }
        for failure in tally.failures.prefix(20) { Issue.record(Comment(rawValue: failure)) }
    }
}

/// Counts checks and collects what went wrong, without stopping at the first.
struct MatrixTally {
    var requests = 0
    var checks = 0
    var bodyScans = 0
    var failures: [String] = []
    var leaks: [String] = []

    mutating func expect(_ condition: Bool, _ message: @autoclosure () -> String) {
        checks += 1
        if !condition { failures.append(message()) }
    }
}

/// One record of the matrix and who may see it.
struct MatrixRecord {
    var collection: String
    var uuid: String
    var owner: String
    var team: String
    var deleted: Bool
    /// Text found only in this record's data (nil for catalogs and tombstones).
    var secret: String?
    /// For a visit: the person it refers to.
    var person: String?
}

struct MatrixCaller {
    var user: String
    var role: Role
    var team: String
    var token: String
    /// Its own mutation ids (any others are someone else's).
    var mutationIDs: [String] = []
    let client = UUID()
    var seq: Int64 = 0

    func canRead(_ record: MatrixRecord) -> Bool {
        if record.collection == "catalogs" { return true }
        switch role {
        case .admin: return true
        case .coordinator: return record.team == team
        case .field: return record.owner == user
        }
    }

    func canWrite(_ record: MatrixRecord) -> Bool { record.collection != "catalogs" && canRead(record) }
}

struct MatrixWorld {
    var callers: [MatrixCaller]
    var records: [MatrixRecord]
    /// Every mutation id with the user who sent it.
    var mutationOwners: [String: String]
    /// Visits the write phase may create (callers referring to a person they can see).
    var allowedCreates: Set<String> = []

    static func build(_ live: LiveServer) async throws -> MatrixWorld {
        let users: [(String, Role, String)] = [
            ("f-1", .field, "t-1"), ("f-2", .field, "t-1"), ("f-3", .field, "t-2"), ("c-1", .coordinator, "t-1"),
            ("c-2", .coordinator, "t-2"), ("a-1", .admin, "hq"),
        ]
        var callers = try users.map { MatrixCaller(user: $0.0, role: $0.1, team: $0.2, token: try live.token($0.0, $0.1, team: $0.2)) }
        var records: [MatrixRecord] = []
        var owners: [String: String] = [:]
        for index in callers.indices {
            let caller = callers[index]
            let tag = "mxsecret" + caller.user.replacingOccurrences(of: "-", with: "")
            // Field users: two people, a visit to their first, and a tombstone.
            // The coordinator c-1 and the admin also own one person each.
            let peopleCount = caller.role == .field ? 2 : (["c-1", "a-1"].contains(caller.user) ? 1 : 0)
            var mutations: [Mutation] = []
            var made: [MatrixRecord] = []
            var people: [UUID] = []
            for number in 0..<peopleCount {
                let uuid = UUID()
                people.append(uuid)
                let secret = "\(tag)p\(number)"
                mutations.append(callers[index].mutation(.create, "people", uuid, data: ["name": .string(secret)]))
                made.append(MatrixRecord(collection: "people", uuid: uuid.wireText, owner: caller.user, team: caller.team, deleted: false, secret: secret))
            }
            if caller.role == .field {
                let visit = UUID()
                let secret = "\(tag)v0"
                mutations.append(
                    callers[index].mutation(
                        .create, "visits", visit,
                        data: ["person": .string(people[0].wireText), "visited_at": "2026-04-01T09:00:00Z", "notes": .string(secret)]))
                made.append(
                    MatrixRecord(
                        collection: "visits", uuid: visit.wireText, owner: caller.user, team: caller.team, deleted: false, secret: secret,
                        person: people[0].wireText))
                let gone = UUID()
                // Its former name lives on only in its creator's stored push result.
                mutations.append(callers[index].mutation(.create, "people", gone, data: ["name": .string("\(tag)gone")]))
                mutations.append(callers[index].mutation(.delete, "people", gone, data: nil))
                made.append(
                    MatrixRecord(
                        collection: "people", uuid: gone.wireText, owner: caller.user, team: caller.team, deleted: true,
                        secret: "\(tag)gone"))
            }
            guard !mutations.isEmpty else { continue }
            let answer = try await live.push(PushRequest(clientID: caller.client, mutations: mutations), token: caller.token)
            #expect(answer.results.allSatisfy { $0.status == MutationStatus.applied }, "seeding \(caller.user)")
            for mutation in mutations { owners[mutation.id.wireText] = caller.user }
            records += made
        }
        // Catalogs, as the seed put them.
        let catalogs = try await live.pullAll(token: callers[5].token, query: "&collections=catalogs").changes
        #expect(catalogs.count == CatalogSeed.entries.count)
        for change in catalogs {
            records.append(MatrixRecord(collection: "catalogs", uuid: change.uuid.wireText, owner: "system", team: "system", deleted: false))
        }
        return MatrixWorld(callers: callers, records: records, mutationOwners: owners)
    }

    /// The records table by uuid, every column.
    static func records(_ live: LiveServer) throws -> [String: SQLRow] {
        let rows = try live.database.read { try $0.query("SELECT * FROM records ORDER BY id", []) }
        var byUUID: [String: SQLRow] = [:]
        for row in rows { byUUID[row.string(2)] = row }
        return byUUID
    }

    /// What must never appear in an answer to `caller`: the uuid and data of
    /// every record it cannot see, and other users' mutation ids.
    func forbidden(to caller: MatrixCaller) -> [String] {
        var strings: [String] = []
        for record in records where !caller.canRead(record) {
            strings.append(record.uuid)
            if let secret = record.secret { strings.append(secret) }
        }
        strings += mutationOwners.filter { $0.value != caller.user }.map(\.key)
        return strings
    }

    /// Searches a raw answer for anything outside the caller's scope.
    func scan(_ body: String, for caller: MatrixCaller, _ context: String, _ tally: inout MatrixTally) {
        tally.bodyScans += 1
        let lowered = body.lowercased()
        for text in forbidden(to: caller) where lowered.contains(text.lowercased()) {
            tally.leaks.append("\(caller.user) (\(caller.role.rawValue), \(caller.team)) \(context): found \(text) in \(body.prefix(300))")
        }
    }

    func send(
        _ live: LiveServer, _ caller: MatrixCaller, _ method: String, _ target: String, body: Data? = nil,
        _ tally: inout MatrixTally
    ) async throws -> LiveServer.Response {
        tally.requests += 1
        let response = try await live.send(method, target, token: caller.token, body: body)
        scan(response.text, for: caller, "\(method) \(target)", &tally)
        tally.expect(response.status < 500, "\(caller.user) \(method) \(target) answered \(response.status)")
        return response
    }

    // MARK: Reads

    func checkReads(of caller: MatrixCaller, _ live: LiveServer, _ tally: inout MatrixTally) async throws {
        let who = "\(caller.user) (\(caller.role.rawValue))"
        let visible = records.filter(caller.canRead)

        // Pull: the whole scope, tombstones included, and per collection.
        for filter in [nil, "people", "visits", "catalogs"] as [String?] {
            var cursor: String?
            var seen: [String: WireRecord] = [:]
            while true {
                var target = "/v1/pull?limit=7"
                if let filter { target += "&collections=\(filter)" }
                if let cursor { target += "&cursor=\(cursor)" }
                let response = try await send(live, caller, "GET", target, &tally)
                guard response.status == 200, let page = try? response.decode(PullResponse.self) else {
                    tally.expect(false, "\(who) \(target) answered \(response.status)")
                    break
                }
                for change in page.changes {
                    if case .record(let record) = change {
                        seen[record.uuid.wireText] = record
                    } else {
                        tally.expect(false, "\(who) pull: an unexpected removal of \(change.uuid)")
                    }
                }
                cursor = page.cursor.rawValue
                if !page.hasMore { break }
            }
            let expected = visible.filter { filter == nil || $0.collection == filter }
            tally.expect(
                Set(seen.keys) == Set(expected.map(\.uuid)),
                "\(who) pull \(filter ?? "all"): got \(seen.count) records, expected \(expected.count)")
            for record in expected {
                tally.expect(seen[record.uuid]?.deleted == record.deleted, "\(who) pull: \(record.uuid) deleted flag")
            }
        }

        // Scope counts: live records only.
        let scope = try await send(live, caller, "GET", "/v1/scope", &tally)
        if let counts = try? scope.decode(ScopeResponse.self) {
            for collection in ["people", "visits", "catalogs"] {
                let expected = visible.filter { $0.collection == collection && !$0.deleted }.count
                tally.expect(
                    counts.collections[collection]?.count == Int64(expected),
                    "\(who) scope \(collection): \(String(describing: counts.collections[collection]?.count)) expected \(expected)")
            }
            tally.expect(counts.user == caller.user && counts.role == caller.role && counts.team == caller.team, "\(who) scope identity")
        } else {
            tally.expect(false, "\(who) /v1/scope answered \(scope.status)")
        }

        // Every record, by its own collection, another collection, and upper case.
        for record in records {
            let allowed = caller.canRead(record)
            for (collection, uuid) in [(record.collection, record.uuid), (record.collection, record.uuid.uppercased())] {
                let response = try await send(live, caller, "GET", "/v1/records/\(collection)/\(uuid)", &tally)
                tally.expect(
                    response.status == (allowed ? 200 : 404),
                    "\(who) GET \(record.collection) of \(record.owner)/\(record.team): \(response.status)")
                if allowed, let wire = try? response.decode(WireRecord.self) {
                    tally.expect(
                        wire.uuid.wireText == record.uuid && wire.deleted == record.deleted && wire.owner == record.owner,
                        "\(who) GET \(record.uuid) returned another record")
                } else if !allowed {
                    tally.expect(response.error?.code == .notFound, "\(who) GET out of scope: \(response.text.prefix(200))")
                }
            }
            let other = record.collection == "people" ? "visits" : "people"
            let wrong = try await send(live, caller, "GET", "/v1/records/\(other)/\(record.uuid)", &tally)
            tally.expect(wrong.status == 404, "\(who) GET \(record.uuid) under \(other): \(wrong.status)")
        }

        // Search: by shared text, by each secret, and visits by their person.
        let searches: [(collection: String, q: String, expected: [MatrixRecord])] =
            [
                ("people", "mxsecret", visible.filter { $0.collection == "people" && !$0.deleted }),
                ("visits", "mxsecret", visible.filter { $0.collection == "visits" && !$0.deleted }),
                ("catalogs", "district", []),
            ] + records.compactMap { record in
                guard let secret = record.secret else { return nil }
                return (record.collection, secret, caller.canRead(record) && !record.deleted ? [record] : [])
            }
            + records.filter { $0.collection == "people" }.map { person in
                (
                    "visits", person.uuid,
                    records.filter { $0.person == person.uuid && caller.canRead($0) && !$0.deleted }
                )
            }
        for search in searches {
            let target = "/v1/search?collection=\(search.collection)&q=\(search.q)&limit=200"
            let response = try await send(live, caller, "GET", target, &tally)
            guard let found = try? response.decode(SearchResponse.self) else {
                tally.expect(false, "\(who) \(target) answered \(response.status)")
                continue
            }
            let uuids = Set(found.records.map(\.uuid.wireText))
            if search.collection == "catalogs" {
                let districts = CatalogSeed.entries.filter { $0.name.contains("district") }.count
                tally.expect(found.records.count == districts, "\(who) catalog search found \(found.records.count)")
            } else {
                tally.expect(
                    uuids == Set(search.expected.map(\.uuid)),
                    "\(who) search \(search.collection) q=\(search.q): \(uuids.count) found, \(search.expected.count) expected")
            }
        }

        // Mutation results: only one's own, whatever the role.
        for (id, owner) in mutationOwners.sorted(by: { $0.key < $1.key }) {
            let response = try await send(live, caller, "GET", "/v1/mutations/\(id)", &tally)
            tally.expect(
                response.status == (owner == caller.user ? 200 : 404),
                "\(who) GET /v1/mutations of \(owner): \(response.status)")
        }
    }

    // MARK: Writes

    mutating func checkWrites(of callerIndex: MatrixCaller, _ live: LiveServer, _ tally: inout MatrixTally) async throws {
        guard let index = callers.firstIndex(where: { $0.user == callerIndex.user }) else { return }
        let who = "\(callers[index].user) (\(callers[index].role.rawValue))"
        let catalogs = records.filter { $0.collection == "catalogs" }.prefix(3)
        let targets = records.filter { $0.collection != "catalogs" } + catalogs

        for record in targets {
            let caller = callers[index]
            let readable = caller.canRead(record)
            let writable = caller.canWrite(record)
            let patch: JSONObject = record.collection == "visits" ? ["notes": "pwned"] : ["name": "pwned"]
            // Out of scope, unconditional: not found. In scope, from a stale base
            // version: a conflict that shows the (visible) record and changes nothing.
            let base: Int64? = writable ? 1 : nil
            let attempts: [(MutationOp, JSONObject?, Int64?)] = [
                (.update, patch, base), (.delete, nil, base), (.create, record.collection == "catalogs" ? ["catalog": "x", "code": "y", "name": "z"] : patch, nil),
            ]
            for (op, data, base) in attempts {
                let mutation = callers[index].mutation(op, record.collection, UUID(uuidString: record.uuid)!, base: base, data: data)
                let result = try await push(mutation, by: callers[index], live, &tally)
                guard let result else { continue }
                let context = "\(who) \(op.rawValue) \(record.collection) of \(record.owner)/\(record.team)"
                let expected: MutationStatus
                if record.collection == "catalogs" {
                    expected = .forbidden
                } else if op == .create {
                    expected = .conflict
                } else if !writable {
                    expected = .notFound
                } else if record.deleted {
                    expected = op == .delete ? .applied : .conflict
                } else {
                    expected = .conflict
                }
                tally.expect(result.status == expected, "\(context): \(result.status.rawValue), expected \(expected.rawValue)")
                if !readable || record.collection == "catalogs" {
                    tally.expect(result.record == nil, "\(context): the answer carries the record")
                } else if result.status == .conflict {
                    tally.expect(result.record?.uuid.wireText == record.uuid, "\(context): conflict without the current copy")
                }
            }

            // Assign: only the admin, and here only to the record's current holder (no change).
            let caller2 = callers[index]
            let body: String
            if caller2.role == .admin {
                body = #"{"owner": "\#(record.owner)", "team": "\#(record.team)"}"#
            } else {
                body = #"{"owner": "\#(caller2.user)", "team": "\#(caller2.team)"}"#
            }
            let assign = try await send(
                live, caller2, "POST", "/v1/records/\(record.collection)/\(record.uuid)/assign", body: Data(body.utf8), &tally)
            let expectedStatus = caller2.role != .admin ? 403 : (record.collection == "catalogs" ? 404 : 200)
            tally.expect(assign.status == expectedStatus, "\(who) assign \(record.collection) of \(record.owner): \(assign.status)")
        }

        // A visit referring to each person: applied only for a person the
        // caller can see and that is not deleted; otherwise rejected in the
        // very words used for a person that does not exist.
        let nobody = try await referencing(UUID().wireText, by: index, live, &tally)
        let missing = nobody?.errors?["person"]
        tally.expect(nobody?.status == .rejected && missing != nil, "\(who) visit to nobody: \(String(describing: nobody?.status))")
        for person in records where person.collection == "people" {
            guard let result = try await referencing(person.uuid, by: index, live, &tally) else { continue }
            let allowed = callers[index].canRead(person) && !person.deleted
            let context = "\(who) visit to a person of \(person.owner)/\(person.team)"
            if allowed {
                tally.expect(result.status == .applied, "\(context): \(result.status.rawValue)")
                if let uuid = result.record?.uuid.wireText { allowedCreates.insert(uuid) }
            } else {
                tally.expect(result.status == .rejected, "\(context): \(result.status.rawValue)")
                tally.expect(result.errors?["person"] == missing, "\(context): tells an unseen person from a missing one")
            }
        }
    }

    func referencing(_ person: String, by index: Int, _ live: LiveServer, _ tally: inout MatrixTally) async throws
        -> MutationResult?
    {
        var caller = callers[index]
        let mutation = caller.mutation(
            .create, "visits", UUID(), data: ["person": .string(person), "visited_at": "2026-04-02T09:00:00Z", "notes": "probe"])
        return try await push(mutation, by: caller, live, &tally)
    }

    /// Sends one mutation; the caller's seq only has to increase, so a
    /// fresh client id per push keeps things simple.
    func push(_ mutation: Mutation, by caller: MatrixCaller, _ live: LiveServer, _ tally: inout MatrixTally) async throws
        -> MutationResult?
    {
        let body = try WireCoding.encode(PushRequest(clientID: UUID(), mutations: [mutation]))
        let response = try await send(live, caller, "POST", "/v1/push", body: body, &tally)
        guard response.status == 200, let answer = try? response.decode(PushResponse.self), answer.results.count == 1 else {
            tally.expect(false, "\(caller.user) push answered \(response.status): \(response.text.prefix(200))")
            return nil
        }
        return answer.results[0]
    }
}

extension MatrixCaller {
    mutating func mutation(_ op: MutationOp, _ collection: String, _ uuid: UUID, base: Int64? = nil, data: JSONObject?) -> Mutation {
        seq += 1
        let mutation = Mutation(seq: seq, id: UUID(), op: op, collection: collection, uuid: uuid, baseVersion: base, data: data)
        mutationIDs.append(mutation.id.wireText)
        return mutation
    }
}
