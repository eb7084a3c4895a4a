import Foundation
import OutpostCore
import Testing

@Suite("Wire types", .timeLimit(.minutes(5)))
struct WireTypesTests {
    let uuid = "0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b"
    let other = "0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6c"
    let time = "2026-11-29T10:00:00.123456Z"

    func decode<T: Decodable>(_ type: T.Type, _ json: String) throws -> T {
        try WireCoding.decode(type, from: Data(json.utf8))
    }

    func decodeError<T: Decodable>(_ type: T.Type, _ json: String) -> WireError? {
        do {
            _ = try decode(type, json)
            return nil
        } catch let error as WireError {
            return error
        } catch {
            Issue.record("expected a WireError, got \(error)")
            return nil
        }
    }

    @Test func pushRequestRoundTripsWithLowercaseUUIDs() throws {
        let json = """
            {"client_id": "\(uuid.uppercased())", "mutations": [
              {"seq": 17, "id": "\(uuid)", "op": "create", "collection": "people", "uuid": "\(other)", "data": {"name": "Ana", "section": 3}},
              {"seq": 18, "id": "\(other)", "op": "update", "collection": "people", "uuid": "\(other)", "base_version": 88123, "data": {"phone": null}},
              {"seq": 19, "id": "\(uuid)", "op": "delete", "collection": "people", "uuid": "\(other)", "base_version": 88130}]}
            """
        let request = try decode(PushRequest.self, json)
        #expect(request.mutations.map(\.op) == [.create, .update, .delete])
        #expect(request.mutations[0].data?["section"] == .int(3))
        #expect(request.mutations[1].data?["phone"] == .null)
        #expect(request.mutations[2].baseVersion == 88130)
        let text = String(decoding: try WireCoding.encode(request), as: UTF8.self)
        #expect(text.contains("\"client_id\":\"\(uuid)\""))
        #expect(!text.contains(uuid.uppercased()))
        #expect(try decode(PushRequest.self, text) == request)
    }

    @Test func unknownOpIsAClearError() {
        let error = decodeError(
            Mutation.self, #"{"seq": 1, "id": "\#(uuid)", "op": "upsert", "collection": "people", "uuid": "\#(uuid)", "data": {}}"#)
        #expect(error?.path == "op")
        #expect(error?.description.contains("must be one of create, update, delete (got 'upsert')") == true)
    }

    @Test func unknownStatusIsAClearError() {
        let error = decodeError(
            MutationResult.self, #"{"seq": 1, "id": "\#(uuid)", "status": "maybe"}"#)
        #expect(error?.path == "status")
        #expect(error?.description.contains("got 'maybe'") == true)
    }

    @Test func missingRequiredFieldNamesItsPath() {
        let error = decodeError(
            PushRequest.self,
            #"{"client_id": "\#(uuid)", "mutations": [{"seq": 1, "id": "\#(uuid)", "op": "create", "uuid": "\#(uuid)", "data": {}}]}"#)
        #expect(error?.path == "mutations[0].collection")
        #expect(error?.problem == "is missing")
    }

    @Test(arguments: ["not-a-uuid", "0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6", "0190a3c45b6d7e8f9a0b1c2d3e4f5a6b", ""])
    func malformedUUIDIsRejected(_ text: String) {
        let error = decodeError(
            Mutation.self, #"{"seq": 1, "id": "\#(text)", "op": "delete", "collection": "people", "uuid": "\#(uuid)"}"#)
        #expect(error?.path == "id")
        #expect(error?.problem.contains("must be a UUID") == true)
    }

    @Test func wrongTypeSaysWhatWasExpected() {
        let error = decodeError(
            Mutation.self, #"{"seq": "one", "id": "\#(uuid)", "op": "delete", "collection": "people", "uuid": "\#(uuid)"}"#)
        #expect(error == WireError(path: "seq", problem: "must be an integer"))
    }

    @Test func createAndUpdateNeedDataDeleteMustNotHaveIt() {
        #expect(
            decodeError(Mutation.self, #"{"seq": 1, "id": "\#(uuid)", "op": "update", "collection": "p", "uuid": "\#(uuid)"}"#)?
                .path == "data")
        #expect(
            decodeError(
                Mutation.self, #"{"seq": 1, "id": "\#(uuid)", "op": "delete", "collection": "p", "uuid": "\#(uuid)", "data": {}}"#)?
                .path == "data")
        #expect(
            decodeError(
                Mutation.self,
                #"{"seq": 1, "id": "\#(uuid)", "op": "create", "collection": "p", "uuid": "\#(uuid)", "base_version": 3, "data": {}}"#)?
                .path == "base_version")
    }

    @Test func pushMustHaveIncreasingSeqs() {
        let error = decodeError(
            PushRequest.self,
            #"{"client_id": "\#(uuid)", "mutations": [{"seq": 2, "id": "\#(uuid)", "op": "delete", "collection": "p", "uuid": "\#(uuid)"}, {"seq": 2, "id": "\#(other)", "op": "delete", "collection": "p", "uuid": "\#(uuid)"}]}"#
        )
        #expect(error?.problem.contains("strictly increasing") == true)
    }

    @Test func invalidJSONIsNamedAsSuch() {
        #expect(decodeError(PushRequest.self, "{\"client_id\": ") == WireError(path: "", problem: "is not valid JSON"))
    }

    @Test func pushResponseKeepsServerTimeByteForByte() throws {
        let json = """
            {"results": [
              {"seq": 17, "id": "\(uuid)", "status": "applied", "record": {"collection": "people", "uuid": "\(other)", "id": 4711, "version": 88123, "updated_at": "\(time)", "deleted": false, "owner": "u-17", "team": "t-3", "data": {"name": "Ana"}}},
              {"seq": 18, "id": "\(other)", "status": "rejected", "code": "invalid_field", "errors": {"phone": "must be text"}},
              {"seq": 19, "id": "\(uuid)", "status": "not_found"}],
             "last_seq": 19, "server_time": "2026-11-29T10:00:00.100000+00:00"}
            """
        let response = try decode(PushResponse.self, json)
        #expect(response.results.map(\.status) == [.applied, .rejected, .notFound])
        #expect(response.results[0].record?.updatedAt.rawValue == time)
        #expect(response.results[1].errors == ["phone": "must be text"])
        // Not re-formatted: the offset form stays as the server wrote it.
        #expect(response.serverTime.rawValue == "2026-11-29T10:00:00.100000+00:00")
        let again = String(decoding: try WireCoding.encode(response), as: UTF8.self)
        #expect(again.contains("\"server_time\":\"2026-11-29T10:00:00.100000+00:00\""))
    }

    @Test func appliedResultNeedsRecord() {
        #expect(decodeError(MutationResult.self, #"{"seq": 1, "id": "\#(uuid)", "status": "applied"}"#)?.path == "record")
    }

    @Test func pullResponseDistinguishesRecordsTombstonesAndRemovals() throws {
        let json = """
            {"changes": [
              {"collection": "people", "uuid": "\(uuid)", "id": 1, "version": 5, "updated_at": "\(time)", "deleted": false, "owner": "u", "team": "t", "data": {"name": "Ana"}},
              {"collection": "people", "uuid": "\(other)", "id": 2, "version": 6, "updated_at": "\(time)", "deleted": true, "owner": "u", "team": "t", "data": null},
              {"collection": "people", "uuid": "\(other)", "deleted": true, "removed": true}],
             "cursor": "opaque-123", "has_more": true, "server_time": "\(time)"}
            """
        let page = try decode(PullResponse.self, json)
        #expect(page.cursor.rawValue == "opaque-123")
        #expect(page.hasMore)
        guard case .record(let live) = page.changes[0], case .record(let tombstone) = page.changes[1],
            case .removed(let collection, let removed) = page.changes[2]
        else {
            Issue.record("unexpected change kinds: \(page.changes)")
            return
        }
        #expect(!live.deleted && live.data?["name"] == "Ana")
        #expect(tombstone.deleted && tombstone.data == nil)
        #expect(collection == "people" && removed.wireText == other)
        #expect(try decode(PullResponse.self, String(decoding: try WireCoding.encode(page), as: UTF8.self)) == page)
    }

    @Test func liveRecordWithoutDataIsRejected() {
        let error = decodeError(
            WireRecord.self,
            #"{"collection": "people", "uuid": "\#(uuid)", "id": 1, "version": 5, "updated_at": "\#(time)", "deleted": false, "owner": "u", "team": "t"}"#
        )
        #expect(error?.path == "data")
    }

    @Test func badServerTimestampIsRejected() {
        let error = decodeError(
            HealthResponse.self, #"{"status": "ok", "server_time": "yesterday"}"#)
        #expect(error?.path == "server_time")
    }

    @Test func scopeAndErrorBodies() throws {
        let scope = try decode(
            ScopeResponse.self,
            #"{"user": "u-1", "role": "coordinator", "team": "t-3", "collections": {"people": {"count": 235613, "window_field": "created_at", "read_only": false}}}"#
        )
        #expect(scope.role == .coordinator)
        #expect(scope.collections["people"] == CollectionScope(count: 235613, windowField: "created_at", readOnly: false))
        #expect(decodeError(ScopeResponse.self, #"{"user": "u", "role": "root", "team": "t", "collections": {}}"#)?.path == "role")

        let body = ErrorBody(code: .invalidRequest, message: "The name is missing.", fields: ["name": "is required"])
        let text = String(decoding: try WireCoding.encode(body), as: UTF8.self)
        #expect(text == #"{"error":{"code":"invalid_request","fields":{"name":"is required"},"message":"The name is missing."}}"#)
        #expect(try decode(ErrorBody.self, text) == body)
        // A code this client does not know yet still decodes.
        #expect(try decode(ErrorBody.self, #"{"error": {"code": "brand_new", "message": "x"}}"#).code.rawValue == "brand_new")
        #expect(ErrorCode.resyncRequired.httpStatus == 410)
    }

    @Test func collectionSchemaDecodesFromConfig() throws {
        let schema = try decode(
            CollectionSchema.self,
            #"{"name": "visits", "fields": {"person": {"type": "reference", "collection": "people", "required": true}, "visited_at": {"type": "timestamp", "required": true}}, "window_field": "visited_at"}"#
        )
        #expect(schema.references == ["person": "people"])
        #expect(schema.policy == .serverWins)
        #expect(decodeError(CollectionSchema.self, #"{"name": "Bad Name", "fields": {}}"#)?.path == "name")
        #expect(decodeError(CollectionSchema.self, #"{"name": "x", "fields": {"a": {"type": "blob"}}}"#) != nil)
        #expect(decodeError(CollectionSchema.self, #"{"name": "x", "fields": {}, "window_field": "nope"}"#)?.path == "window_field")
    }
}

@Suite("Health response", .timeLimit(.minutes(1)))
struct HealthResponseTests {
    let time = "2026-11-29T10:00:00.123456Z"

    @Test func limitsAreReadAndAbsentOrUnreadableLimitsAreNil() throws {
        let full = try WireCoding.decode(
            HealthResponse.self,
            from: Data(#"{"status": "ok", "server_time": "\#(time)", "limits": {"max_body_bytes": 4194304, "max_mutations": 500, "max_field_bytes": 65536, "max_depth": 32, "max_future": 1}}"#.utf8))
        #expect(full.limits == HealthResponse.Limits(maxBodyBytes: 4_194_304, maxMutations: 500, maxFieldBytes: 65_536, maxDepth: 32))
        let old = try WireCoding.decode(HealthResponse.self, from: Data(#"{"status": "ok", "server_time": "\#(time)"}"#.utf8))
        #expect(old.limits == nil && old.serverTime.rawValue == time)
        let odd = try WireCoding.decode(
            HealthResponse.self, from: Data(#"{"status": "ok", "server_time": "\#(time)", "limits": {"max_body_bytes": "big"}}"#.utf8))
        #expect(odd.limits == nil)
        let written = try WireCoding.decode(HealthResponse.self, from: try WireCoding.encode(full))
        #expect(written == full)
    }
}
