import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// PROTOCOL push rules 1-7, against a live server over a real socket, once per backend.
@Suite("Push protocol", .timeLimit(.minutes(5)))
struct PushProtocolTests {
    @Test(arguments: Backend.available)
    func createIsAppliedAndAResendIsADuplicateWithTheOriginalResult(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("u-1")
        let device = TestDevice()
        let create = device.mutation(.create, data: ["name": "Ana", "section": 3])
        let first = try await live.push(device.request(create), token: token)
        #expect(first.lastSeq == 1)
        let applied = try #require(first.results.first)
        #expect(applied.status == .applied)
        let record = try #require(applied.record)
        #expect(record.owner == "u-1" && record.team == "t-1", "owner and team are set by the server")
        #expect(record.data?["name"] == "Ana")
        #expect(record.data?["created_at"] != nil, "the window field is filled with server time")

        // The response was lost; the device resends the same seq.
        let again = try await live.push(device.request(create), token: token)
        #expect(again.results[0].status == .duplicate)
        #expect(again.results[0].originalStatus == .applied)
        #expect(again.results[0].record == record)
        let all = try await live.pullAll(token: token, query: "&collections=people")
        #expect(all.changes.count == 1, "no duplicate effect")
    }

    /// A restored database reuses seqs for new mutations: the server
    /// applies nothing of such a push and names the seqs to renumber; the
    /// same ids under the same seqs are still plain retries.
    @Test(arguments: Backend.available)
    func aReusedSeqWithAnotherMutationIsClientBehindAndAppliesNothing(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("u-1")
        let device = TestDevice()
        let a = device.mutation(.create, data: ["name": "A"])
        let b = device.mutation(.create, data: ["name": "B"])
        _ = try await live.push(device.request(a, b), token: token)

        // The restored copy: seq 2 now names a new capture C, seq 3 a new D.
        device.seq = 1
        let c = device.mutation(.create, data: ["name": "C"])
        let d = device.mutation(.create, data: ["name": "D"])
        let refused = try await live.send("POST", "/v1/push", token: token, body: try WireCoding.encode(device.request(a, c, d)))
        #expect(refused.status == 409)
        #expect(refused.error?.code == .clientBehind)
        #expect(refused.error?.lastSeq == 2)
        #expect(refused.error?.seqs == [2], "only the seq whose id differs; 1 is a true retry, 3 is new")
        var all = try await live.pullAll(token: token, query: "&collections=people")
        #expect(all.changes.count == 2, "nothing of the refused push was applied, not even D")

        // Renumbered above last_seq, everything goes through once.
        let renumbered = PushRequest(clientID: device.clientID, mutations: [
            a, Mutation(seq: 3, id: c.id, op: .create, collection: "people", uuid: c.uuid, baseVersion: nil, data: c.data),
            Mutation(seq: 4, id: d.id, op: .create, collection: "people", uuid: d.uuid, baseVersion: nil, data: d.data),
        ])
        let answer = try await live.push(renumbered, token: token)
        #expect(answer.results.map(\.status) == [.duplicate, .applied, .applied])
        all = try await live.pullAll(token: token, query: "&collections=people")
        #expect(all.changes.count == 4)
    }

    /// Two copies of one database may send the same queued mutation under
    /// different seqs: it takes effect once.
    @Test(arguments: Backend.available)
    func aMutationIdTakesEffectOnceWhateverItsSeq(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("u-1")
        let device = TestDevice()
        let create = device.mutation(.create, data: ["name": "Ana", "section": 1])
        let first = try await live.push(device.request(create), token: token)
        let version = try #require(first.results.first?.record?.version)
        let edit = device.mutation(.update, uuid: create.uuid, data: ["section": 2])
        let edited = try #require(try await live.push(device.request(edit), token: token).results.first?.record?.version)
        #expect(edited > version)
        // The copy sends the same edit (same id) under a later seq, unconditionally.
        let copy = Mutation(seq: 7, id: edit.id, op: .update, collection: "people", uuid: create.uuid, baseVersion: nil, data: ["section": 2])
        let again = try await live.push(device.request(copy), token: token)
        #expect(again.results.first?.status == .duplicate)
        #expect(again.results.first?.originalStatus == .applied)
        #expect(again.lastSeq == 7)
        guard case .record(let record)? = try await live.pullAll(token: token, query: "&collections=people").changes.last else {
            Issue.record("the record is in the feed")
            return
        }
        #expect(record.version == edited, "one update took effect, not two")
    }

    @Test(arguments: Backend.available)
    func lastSeqIsPerUserAndClient(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let ana = try live.token("u-1")
        let bea = try live.token("u-2")
        let device = TestDevice()
        _ = try await live.push(device.request(device.mutation(.create, data: ["name": "Ana"])), token: ana)
        // Another user using the same client id (and seq) is not a duplicate of the first.
        let other = TestDevice()
        let sameSeq = Mutation(seq: 1, id: UUID(), op: .create, collection: "people", uuid: UUID(), data: ["name": "Bea"])
        let answer = try await live.push(PushRequest(clientID: device.clientID, mutations: [sameSeq]), token: bea)
        #expect(answer.results[0].status == .applied)
        _ = other
    }

    @Test(arguments: Backend.available)
    func createOnAnExistingUUID(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let ana = try live.token("u-1")
        let bea = try live.token("u-2")
        let device = TestDevice()
        let uuid = UUID()
        _ = try await live.push(device.request(device.mutation(.create, uuid: uuid, data: ["name": "Ana"])), token: ana)
        // Same client, new seq (e.g. queued twice): duplicate.
        let same = try await live.push(device.request(device.mutation(.create, uuid: uuid, data: ["name": "Ana"])), token: ana)
        #expect(same.results[0].status == .duplicate)
        // Anyone else: conflict, and no copy of a record they cannot see.
        let other = TestDevice()
        let clash = try await live.push(other.request(other.mutation(.create, uuid: uuid, data: ["name": "X"])), token: bea)
        #expect(clash.results[0].status == .conflict)
        #expect(clash.results[0].record == nil)
    }

    @Test(arguments: Backend.available)
    func updateIsAPartialPatchConditionalOnBaseVersion(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("u-1")
        let device = TestDevice()
        let uuid = UUID()
        let created = try await live.push(
            device.request(device.mutation(.create, uuid: uuid, data: ["name": "Ana", "phone": "1", "notes": "n"])),
            token: token)
        let v1 = try #require(created.results[0].record?.version)

        let patch = try await live.push(
            device.request(device.mutation(.update, uuid: uuid, base: v1, data: ["phone": "555", "notes": .null])),
            token: token)
        #expect(patch.results[0].status == .applied)
        let v2 = try #require(patch.results[0].record?.version)
        #expect(v2 > v1)
        #expect(patch.results[0].record?.data?["phone"] == "555")
        #expect(patch.results[0].record?.data?["notes"] == nil, "a key set to null clears the field")
        #expect(patch.results[0].record?.data?["name"] == "Ana", "fields not in the patch stay")

        // A second device edits from the old version: server_wins answers conflict with the current copy.
        let stale = try await live.push(
            device.request(device.mutation(.update, uuid: uuid, base: v1, data: ["phone": "999"])), token: token)
        #expect(stale.results[0].status == .conflict)
        #expect(stale.results[0].record?.version == v2)
        #expect(stale.results[0].record?.data?["phone"] == "555")

        // Without base_version the write is unconditional.
        let blind = try await live.push(device.request(device.mutation(.update, uuid: uuid, data: ["phone": "7"])), token: token)
        #expect(blind.results[0].status == .applied)
    }

    @Test(arguments: Backend.available)
    func lastWriteWinsCollectionsApplyStalePatches(_ backend: Backend) async throws {
        var notes = CollectionSchema(name: "notes", fields: ["text": FieldSchema(.text, required: true)])
        notes.policy = .lastWriteWins
        let live = try LiveServer(backend, config: try ServerConfig(collections: DefaultCollections.all + [notes]))
        let token = try live.token("u-1")
        let device = TestDevice()
        let uuid = UUID()
        let created = try await live.push(device.request(device.mutation(.create, "notes", uuid: uuid, data: ["text": "a"])), token: token)
        let v1 = try #require(created.results[0].record?.version)
        _ = try await live.push(device.request(device.mutation(.update, "notes", uuid: uuid, base: v1, data: ["text": "b"])), token: token)
        let stale = try await live.push(
            device.request(device.mutation(.update, "notes", uuid: uuid, base: v1, data: ["text": "c"])), token: token)
        #expect(stale.results[0].status == .applied)
        #expect(stale.results[0].record?.data?["text"] == "c")
    }

    @Test(arguments: Backend.available)
    func deleteLeavesATombstoneAndIsIdempotent(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("u-1")
        let device = TestDevice()
        let uuid = UUID()
        let created = try await live.push(device.request(device.mutation(.create, uuid: uuid, data: ["name": "Ana"])), token: token)
        let v1 = try #require(created.results[0].record?.version)
        let deleted = try await live.push(device.request(device.mutation(.delete, uuid: uuid, base: v1)), token: token)
        #expect(deleted.results[0].status == .applied)
        #expect(deleted.results[0].record?.deleted == true)
        #expect(deleted.results[0].record?.data == nil)
        let twice = try await live.push(device.request(device.mutation(.delete, uuid: uuid, base: v1)), token: token)
        #expect(twice.results[0].status == .applied, "deleting a deleted record is applied")
        // An edit cannot resurrect it.
        let edit = try await live.push(device.request(device.mutation(.update, uuid: uuid, data: ["name": "Back"])), token: token)
        #expect(edit.results[0].status == .conflict)
        #expect(edit.results[0].record?.deleted == true)
        let record = try await live.get("/v1/records/people/\(uuid.wireText)", token: token)
        #expect(try record.decode(WireRecord.self).deleted)
    }

    @Test(arguments: Backend.available)
    func staleDeleteIsAConflict(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("u-1")
        let device = TestDevice()
        let uuid = UUID()
        let created = try await live.push(device.request(device.mutation(.create, uuid: uuid, data: ["name": "Ana"])), token: token)
        let v1 = try #require(created.results[0].record?.version)
        _ = try await live.push(device.request(device.mutation(.update, uuid: uuid, base: v1, data: ["phone": "1"])), token: token)
        let stale = try await live.push(device.request(device.mutation(.delete, uuid: uuid, base: v1)), token: token)
        #expect(stale.results[0].status == .conflict)
        #expect(stale.results[0].record?.deleted == false)
    }

    @Test(arguments: Backend.available)
    func validationRejectsAndTheBatchGoesOn(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("u-1")
        let device = TestDevice()
        let person = UUID()
        let answer = try await live.push(
            device.request(
                device.mutation(.create, data: ["phone": "1"]),
                device.mutation(.create, data: ["name": 7, "section": "three", "colour": "red"]),
                device.mutation(.create, "visits", data: ["person": .string(UUID().wireText), "visited_at": "2026-11-29T09:00:00Z"]),
                device.mutation(.create, uuid: person, data: ["name": "Ana"]),
                device.mutation(.create, "visits", data: ["person": .string(person.wireText), "visited_at": "yesterday"]),
                device.mutation(.create, "visits", data: ["person": .string(person.wireText), "visited_at": "2026-11-29T09:00:00Z"]),
                device.mutation(.create, "invoices", data: ["x": 1]),
                device.mutation(.create, "catalogs", data: ["catalog": "x", "code": "y", "name": "z"])
            ), token: token)
        #expect(answer.results.map(\.status) == [.rejected, .rejected, .rejected, .applied, .rejected, .applied, .rejected, .forbidden])
        #expect(answer.results[0].errors == ["name": "is required"])
        #expect(answer.results[0].code == "invalid_field")
        #expect(answer.results[1].errors?["name"] == "must be text")
        #expect(answer.results[1].errors?["section"] == "must be a whole number")
        #expect(answer.results[1].errors?["colour"] == "is not a field of people")
        #expect(answer.results[2].errors?["person"] == "refers to a people record that does not exist")
        #expect(answer.results[4].errors?["visited_at"]?.contains("RFC 3339") == true)
        #expect(answer.results[6].code == "unknown_collection")
        #expect(answer.results[7].code == "read_only")
        #expect(answer.lastSeq == 8, "permanent failures count as processed")
    }

    @Test(arguments: Backend.available)
    func referencesMustBeVisibleToTheCaller(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let ana = try live.token("u-1")
        let bea = try live.token("u-2")
        let device = TestDevice()
        let person = UUID()
        _ = try await live.push(device.request(device.mutation(.create, uuid: person, data: ["name": "Ana"])), token: ana)
        let other = TestDevice()
        let visit = try await live.push(
            other.request(other.mutation(.create, "visits", data: ["person": .string(person.wireText), "visited_at": "2026-11-29T09:00:00Z"])),
            token: bea)
        #expect(visit.results[0].status == .rejected)
    }

    @Test(arguments: Backend.available)
    func mutationLookupAnswersTheStoredResult(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("u-1")
        let stranger = try live.token("u-2")
        let device = TestDevice()
        let create = device.mutation(.create, data: ["name": "Ana"])
        _ = try await live.push(device.request(create), token: token)
        let lookup = try await live.get("/v1/mutations/\(create.id.wireText)", token: token)
        #expect(lookup.status == 200)
        let result = try lookup.decode(MutationLookup.self)
        #expect(result.status == .applied)
        #expect(result.record?.uuid == create.uuid)
        #expect(try await live.get("/v1/mutations/\(UUID().wireText)", token: token).error?.code == .notFound)
        #expect(try await live.get("/v1/mutations/\(create.id.wireText)", token: stranger).status == 404)
        #expect(try await live.get("/v1/mutations/not-a-uuid", token: token).status == 400)
    }

    @Test(arguments: Backend.available)
    func aTransientFailureAppliesNothingAndTheResendAppliesAll(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("u-1")
        let device = TestDevice()
        let request = device.request(
            device.mutation(.create, data: ["name": "Ana"]), device.mutation(.create, data: ["name": "Bea"]))
        live.server.hooks.beforePushCommit = { _ in throw DatabaseError(kind: .transient, message: "injected") }
        let failed = try await live.send("POST", "/v1/push", token: token, body: try WireCoding.encode(request))
        #expect(failed.status == 503)
        #expect(failed.error?.code == .unavailable)
        #expect(failed.headers["retry-after"] != nil, "Retry-After is always set on 503")
        live.server.hooks.beforePushCommit = nil
        #expect(try await live.pullAll(token: token, query: "&collections=people").changes.isEmpty)
        let retried = try await live.push(request, token: token)
        #expect(retried.results.map(\.status) == [.applied, .applied])
        #expect(try await live.pullAll(token: token, query: "&collections=people").changes.count == 2)
    }

    /// The app's schema and version headers reach the server over a real
    /// socket: a server that needs a newer schema refuses an older app, and
    /// keeps what each client declared. (The HTTP layer once passed on only
    /// the token and content type, so over a socket every app looked
    /// undeclared.)
    @Test(arguments: Backend.available)
    func theAppsSchemaAndVersionHeadersArriveOverTheSocket(_ backend: Backend) async throws {
        var config = try ServerConfig()
        config.minSchema = 3
        let live = try LiveServer(backend, config: config)
        let token = try live.token("f-1")
        let device = TestDevice()
        let body = try WireCoding.encode(device.request(device.mutation(.create, data: ["name": "Ana"])))
        func push(schema: String?) async throws -> LiveServer.Response {
            var headers = ["Outpost-Client": "org.example.field/2.4.1"]
            headers["Outpost-Schema"] = schema
            return try await live.send("POST", "/v1/push", token: token, body: body, headers: headers)
        }
        #expect(try await push(schema: "2").status == 426)
        #expect(try await push(schema: nil).status == 426)
        #expect(try await push(schema: "3").status == 200)
        let declared = try live.database.read { sql in
            try sql.query("SELECT schema_version, app FROM client_versions", []).map { "\($0.int(0)) \($0.string(1))" }
        }
        #expect(declared == ["3 org.example.field/2.4.1"])
    }
}
