import Foundation
@testable import OutpostCore
import Testing

/// Every message, through every path that writes it, against JSON written
/// out by hand: the keys now come from `WireKey`, and these bytes are the
/// proof that no path's output moved by a byte. Each reader reads each
/// writer's form back to the same value.
@Suite("Wire bytes of every message, every path", .timeLimit(.minutes(5)))
struct WireBytesTests {
    static let client = UUID.fromWire("0190a3c4-0000-7000-8000-00000000c1d1")!
    static let ids = (1...3).map { UUID.fromWire("0190a3c5-1111-7000-8000-00000000001\($0)")! }
    static let uuids = (1...4).map { UUID.fromWire("0190a3c5-aaaa-7000-8000-00000000000\($0)")! }
    static let time = ServerTimestamp(rawValue: "2026-11-29T10:00:00.123456Z")

    // MARK: Push requests

    static let request = PushRequest(
        clientID: client,
        mutations: [
            Mutation(seq: 17, id: ids[0], op: .create, collection: "people", uuid: uuids[0], data: ["name": "Ana"], deviceTime: time),
            Mutation(seq: 18, id: ids[1], op: .update, collection: "people", uuid: uuids[1], baseVersion: 88123, data: ["phone": "555"]),
            Mutation(seq: 19, id: ids[2], op: .delete, collection: "people", uuid: uuids[2], baseVersion: 88130),
        ])

    /// Foundation's encoder: keys sorted.
    static let requestCodable =
        #"{"client_id":"0190a3c4-0000-7000-8000-00000000c1d1","mutations":["#
        + #"{"collection":"people","data":{"name":"Ana"},"device_time":"2026-11-29T10:00:00.123456Z","id":"0190a3c5-1111-7000-8000-000000000011","op":"create","seq":17,"uuid":"0190a3c5-aaaa-7000-8000-000000000001"},"#
        + #"{"base_version":88123,"collection":"people","data":{"phone":"555"},"id":"0190a3c5-1111-7000-8000-000000000012","op":"update","seq":18,"uuid":"0190a3c5-aaaa-7000-8000-000000000002"},"#
        + #"{"base_version":88130,"collection":"people","id":"0190a3c5-1111-7000-8000-000000000013","op":"delete","seq":19,"uuid":"0190a3c5-aaaa-7000-8000-000000000003"}]}"#

    /// The byte writer: keys in the protocol's order.
    static let requestWire =
        #"{"client_id":"0190a3c4-0000-7000-8000-00000000c1d1","mutations":["#
        + #"{"seq":17,"id":"0190a3c5-1111-7000-8000-000000000011","op":"create","collection":"people","uuid":"0190a3c5-aaaa-7000-8000-000000000001","data":{"name":"Ana"},"device_time":"2026-11-29T10:00:00.123456Z"},"#
        + #"{"seq":18,"id":"0190a3c5-1111-7000-8000-000000000012","op":"update","collection":"people","uuid":"0190a3c5-aaaa-7000-8000-000000000002","base_version":88123,"data":{"phone":"555"}},"#
        + #"{"seq":19,"id":"0190a3c5-1111-7000-8000-000000000013","op":"delete","collection":"people","uuid":"0190a3c5-aaaa-7000-8000-000000000003","base_version":88130}]}"#

    @Test func aPushRequestIsTheSameBytesThroughBothWriters() throws {
        #expect(String(decoding: try WireCoding.encode(Self.request), as: UTF8.self) == Self.requestCodable)
        #expect(String(decoding: Self.request.wireBytes(), as: UTF8.self) == Self.requestWire)
        // A queued entry's data text spliced in writes the same mutation.
        var spliced: [UInt8] = []
        let first = Self.request.mutations[0]
        Mutation.appendWire(
            seq: first.seq, id: first.id, op: first.op, collection: first.collection, uuid: first.uuid, baseVersion: nil,
            dataText: #"{"name":"Ana"}"#, deviceTime: first.deviceTime, to: &spliced)
        var direct: [UInt8] = []
        first.appendWire(to: &direct)
        #expect(spliced == direct)
        for form in [Self.requestCodable, Self.requestWire] {
            #expect(PushRequest.readWire(Array(form.utf8)) == Self.request)
            #expect(try WireCoding.decode(PushRequest.self, from: Data(form.utf8)) == Self.request)
        }
    }

    // MARK: Records and push answers

    static let stored = WireRecord(
        collection: "people", uuid: uuids[0], id: 4711, version: 88123, updatedAt: time, deleted: false, owner: "u-17",
        team: "t-3", data: ["name": "Ana"], deviceTime: time)
    static let tombstone = WireRecord(
        collection: "people", uuid: uuids[2], id: 4712, version: 88130, updatedAt: time, deleted: true, owner: "u-17",
        team: "t-3", data: nil)

    static let storedCodable =
        #"{"collection":"people","data":{"name":"Ana"},"deleted":false,"device_time":"2026-11-29T10:00:00.123456Z","id":4711,"#
        + #""owner":"u-17","team":"t-3","updated_at":"2026-11-29T10:00:00.123456Z","uuid":"0190a3c5-aaaa-7000-8000-000000000001","version":88123}"#
    static let tombstoneCodable =
        #"{"collection":"people","data":null,"deleted":true,"id":4712,"owner":"u-17","team":"t-3","#
        + #""updated_at":"2026-11-29T10:00:00.123456Z","uuid":"0190a3c5-aaaa-7000-8000-000000000003","version":88130}"#
    /// As the server writes a record from its row (its test compares its writer with these).
    static let storedWire =
        #"{"collection":"people","uuid":"0190a3c5-aaaa-7000-8000-000000000001","id":4711,"version":88123,"#
        + #""updated_at":"2026-11-29T10:00:00.123456Z","deleted":false,"owner":"u-17","team":"t-3","data":{"name":"Ana"},"#
        + #""device_time":"2026-11-29T10:00:00.123456Z"}"#
    static let tombstoneWire =
        #"{"collection":"people","uuid":"0190a3c5-aaaa-7000-8000-000000000003","id":4712,"version":88130,"#
        + #""updated_at":"2026-11-29T10:00:00.123456Z","deleted":true,"owner":"u-17","team":"t-3","data":null}"#

    @Test func aRecordIsTheSameBytesAndReadsBackFromEitherForm() throws {
        #expect(String(decoding: try WireCoding.encode(Self.stored), as: UTF8.self) == Self.storedCodable)
        #expect(String(decoding: try WireCoding.encode(Self.tombstone), as: UTF8.self) == Self.tombstoneCodable)
        for (form, record) in [(Self.storedCodable, Self.stored), (Self.storedWire, Self.stored),
                               (Self.tombstoneCodable, Self.tombstone), (Self.tombstoneWire, Self.tombstone)] {
            #expect(try WireCoding.decode(WireRecord.self, from: Data(form.utf8)) == record)
            var scanner = JSONScanner(Array(form.utf8))
            var text: String?
            var deferred = false
            #expect(try WireRecord.readWire(&scanner, dataText: &text, deferred: &deferred) == record)
        }
    }

    static let results = [
        MutationResult(seq: 17, id: ids[0], status: .applied, record: stored),
        MutationResult(seq: 18, id: ids[1], status: .rejected, code: "invalid_field", errors: ["phone": "must be text"]),
        MutationResult(seq: 19, id: ids[2], status: .duplicate, record: tombstone, originalStatus: .applied),
    ]

    static let answerCodable =
        #"{"last_seq":19,"results":["#
        + #"{"id":"0190a3c5-1111-7000-8000-000000000011","record":\#(storedCodable),"seq":17,"status":"applied"},"#
        + #"{"code":"invalid_field","errors":{"phone":"must be text"},"id":"0190a3c5-1111-7000-8000-000000000012","seq":18,"status":"rejected"},"#
        + #"{"id":"0190a3c5-1111-7000-8000-000000000013","original_status":"applied","record":\#(tombstoneCodable),"seq":19,"status":"duplicate"}],"#
        + #""server_time":"2026-11-29T10:00:00.123456Z"}"#

    static let answerWire =
        #"{"results":["#
        + #"{"seq":17,"id":"0190a3c5-1111-7000-8000-000000000011","status":"applied","record":\#(storedWire)},"#
        + #"{"seq":18,"id":"0190a3c5-1111-7000-8000-000000000012","status":"rejected","code":"invalid_field","errors":{"phone":"must be text"}},"#
        + #"{"seq":19,"id":"0190a3c5-1111-7000-8000-000000000013","status":"duplicate","record":\#(tombstoneWire),"original_status":"applied"}],"#
        + #""last_seq":19,"server_time":"2026-11-29T10:00:00.123456Z"}"#

    @Test func aPushAnswerIsTheSameBytesThroughBothWriters() throws {
        let answer = PushResponse(results: Self.results, lastSeq: 19, serverTime: Self.time)
        #expect(String(decoding: try WireCoding.encode(answer), as: UTF8.self) == Self.answerCodable)
        // The server's path: each result written with its record's JSON spliced in.
        let records = [Self.storedWire, nil, Self.tombstoneWire]
        let written = zip(Self.results, records).map { result, record in
            var out: [UInt8] = []
            MutationResult.appendWire(
                seq: result.seq, id: result.id, status: result.status, originalStatus: result.originalStatus, code: result.code,
                errors: result.errors, record: record.map { text in { $0.append(contentsOf: text.utf8) } }, to: &out)
            return out
        }
        let bytes = PushResponse.wireBytes(results: written, lastSeq: 19, serverTime: Self.time)
        #expect(String(decoding: bytes, as: UTF8.self) == Self.answerWire)
        for form in [Self.answerCodable, Self.answerWire] {
            #expect(PushResponse.readWire(Array(form.utf8)) == answer)
            #expect(try WireCoding.decode(PushResponse.self, from: Data(form.utf8)) == answer)
        }
    }

    @Test func aStoredResultIsTheSameBytes() throws {
        let lookup = MutationLookup(status: .rejected, code: "invalid_field", errors: ["phone": "must be text"])
        let expected = #"{"code":"invalid_field","errors":{"phone":"must be text"},"status":"rejected"}"#
        #expect(String(decoding: try WireCoding.encode(lookup), as: UTF8.self) == expected)
        #expect(try WireCoding.decode(MutationLookup.self, from: Data(expected.utf8)) == lookup)
        let applied = MutationLookup(status: .applied, record: Self.stored)
        let appliedJSON = #"{"record":\#(Self.storedCodable),"status":"applied"}"#
        #expect(String(decoding: try WireCoding.encode(applied), as: UTF8.self) == appliedJSON)
        #expect(try WireCoding.decode(MutationLookup.self, from: Data(appliedJSON.utf8)) == applied)
    }

    // MARK: Pull pages

    static let page = PullResponse(
        changes: [.record(stored), .record(tombstone), .removed(collection: "people", uuid: uuids[3])], cursor: PullCursor(rawValue: "c-88130"),
        hasMore: true, serverTime: time)

    static let pageCodable =
        #"{"changes":[\#(storedCodable),\#(tombstoneCodable),"#
        + #"{"collection":"people","deleted":true,"removed":true,"uuid":"0190a3c5-aaaa-7000-8000-000000000004"}],"#
        + #""cursor":"c-88130","has_more":true,"server_time":"2026-11-29T10:00:00.123456Z"}"#
    /// As the server's page writer puts it together (its test compares).
    static let pageWire =
        #"{"changes":[\#(storedWire),\#(tombstoneWire),"#
        + #"{"collection":"people","uuid":"0190a3c5-aaaa-7000-8000-000000000004","deleted":true,"removed":true}],"#
        + #""cursor":"c-88130","has_more":true,"server_time":"2026-11-29T10:00:00.123456Z"}"#

    @Test func aPullPageIsTheSameBytesAndBothReadersReadEitherForm() throws {
        #expect(String(decoding: try WireCoding.encode(Self.page), as: UTF8.self) == Self.pageCodable)
        for form in [Self.pageCodable, Self.pageWire] {
            #expect(try WireCoding.decode(PullResponse.self, from: Data(form.utf8)) == Self.page)
            let raw = try RawPullPage.parse(Data(form.utf8))
            #expect(raw.cursor == Self.page.cursor && raw.hasMore && raw.serverTime == Self.time)
            #expect(raw.changes.map { raw.uuid($0) } == [Self.uuids[0], Self.uuids[2], Self.uuids[3]])
            #expect(raw.changes.map(\.collection) == ["people", "people", "people"])
            #expect(raw.changes.map(\.removed) == [false, false, true])
            #expect(raw.changes.map(\.deleted) == [false, true, true])
            #expect(raw.changes.map(\.version) == [88123, 88130, 0])
            #expect(raw.changes.map(\.id) == [4711, 4712, 0])
            let first = raw.changes[0]
            #expect(first.data.map(raw.string) == #"{"name":"Ana"}"#)
            #expect(first.deviceTime.map(raw.string) == Self.time.rawValue)
            #expect(raw.string(first.updatedAt) == Self.time.rawValue)
            #expect(raw.string(first.owner) == "u-17" && raw.string(first.team) == "t-3")
            #expect(raw.changes[1].data == nil && raw.changes[1].deviceTime == nil)
        }
    }

    @Test func aPageMissingAFieldIsNamedByItsWireKey() {
        let noCursor = #"{"changes":[],"has_more":false,"server_time":"2026-11-29T10:00:00Z"}"#
        #expect(throws: WireError(path: "cursor", problem: "is missing")) { try RawPullPage.parse(Data(noCursor.utf8)) }
        let noVersion = #"{"changes":[{"collection":"p","uuid":"0190a3c5-aaaa-7000-8000-000000000004","id":1,"#
            + #""updated_at":"t","deleted":true,"owner":"u","team":"t"}],"cursor":"c","has_more":false,"server_time":"2026-11-29T10:00:00Z"}"#
        #expect(throws: WireError(path: "changes[0].version", problem: "is missing")) { try RawPullPage.parse(Data(noVersion.utf8)) }
    }

    // MARK: Errors and health

    @Test func anErrorBodyIsTheSameBytes() throws {
        var body = ErrorBody(
            code: .invalidRequest, message: "The push could not be read.", fields: ["mutations[2].data": "must be absent for a delete"],
            lastSeq: 19, seqs: [20])
        body.requestID = "lb-7f3a:42"
        let expected =
            #"{"error":{"code":"invalid_request","fields":{"mutations[2].data":"must be absent for a delete"},"#
            + #""message":"The push could not be read.","request_id":"lb-7f3a:42"},"last_seq":19,"seqs":[20]}"#
        #expect(String(decoding: try WireCoding.encode(body), as: UTF8.self) == expected)
        #expect(try WireCoding.decode(ErrorBody.self, from: Data(expected.utf8)) == body)
    }

    @Test func aHealthAnswerIsTheSameBytes() throws {
        let health = HealthResponse(
            serverTime: Self.time, limits: .init(maxBodyBytes: 4_194_304, maxMutations: 500, maxFieldBytes: 65_536, maxDepth: 32))
        let expected =
            #"{"limits":{"max_body_bytes":4194304,"max_depth":32,"max_field_bytes":65536,"max_mutations":500},"#
            + #""server_time":"2026-11-29T10:00:00.123456Z","status":"ok"}"#
        #expect(String(decoding: try WireCoding.encode(health), as: UTF8.self) == expected)
        #expect(try WireCoding.decode(HealthResponse.self, from: Data(expected.utf8)) == health)
        let bare = HealthResponse(serverTime: Self.time)
        #expect(String(decoding: try WireCoding.encode(bare), as: UTF8.self) == #"{"server_time":"2026-11-29T10:00:00.123456Z","status":"ok"}"#)
    }

    @Test func aScopeAnswerIsTheSameBytes() throws {
        let scope = ScopeResponse(
            user: "u-17", role: .coordinator, team: "t-3",
            collections: [
                "people": CollectionScope(count: 235_613, windowField: "created_at", readOnly: false),
                "catalogs": CollectionScope(count: 312, windowField: nil, readOnly: true),
            ])
        let expected =
            #"{"collections":{"catalogs":{"count":312,"read_only":true},"#
            + #""people":{"count":235613,"read_only":false,"window_field":"created_at"}},"role":"coordinator","team":"t-3","user":"u-17"}"#
        #expect(String(decoding: try WireCoding.encode(scope), as: UTF8.self) == expected)
        #expect(try WireCoding.decode(ScopeResponse.self, from: Data(expected.utf8)) == scope)
    }

    @Test func aSearchAnswerIsTheSameBytes() throws {
        let found = SearchResponse(records: [Self.stored, Self.tombstone])
        let expected = #"{"records":[\#(Self.storedCodable),\#(Self.tombstoneCodable)]}"#
        #expect(String(decoding: try WireCoding.encode(found), as: UTF8.self) == expected)
        #expect(try WireCoding.decode(SearchResponse.self, from: Data(expected.utf8)) == found)
    }

    @Test func anAttachmentIsTheSameBytesAsCodableAndAsAValue() throws {
        let sha = String(repeating: "ab", count: 32)
        let file = try #require(AttachedFile(sha256: sha, size: 1234, contentType: "image/jpeg"))
        let expected = #"{"content_type":"image/jpeg","sha256":"\#(sha)","size":1234}"#
        #expect(String(decoding: try WireCoding.encode(file), as: UTF8.self) == expected)
        #expect(try WireCoding.decode(AttachedFile.self, from: Data(expected.utf8)) == file)
        #expect(file.jsonValue == .object(["sha256": .string(sha), "size": 1234, "content_type": "image/jpeg"]))
        #expect(AttachedFile(file.jsonValue) == file)
        #expect(AttachedFile.all(in: ["photo": file.jsonValue, "name": "Ana"]) == ["photo": file])
    }

    @Test func aDecodingErrorNamesTheFieldByItsWireKey() {
        let body = #"{"client_id":"0190a3c4-0000-7000-8000-00000000c1d1","mutations":[{"seq":1,"id":"0190a3c5-1111-7000-8000-000000000011","#
            + #""op":"create","collection":"people","uuid":"0190a3c5-aaaa-7000-8000-000000000001","data":{},"base_version":3}]}"#
        #expect(throws: WireError(path: "mutations[0].base_version", problem: "must be absent for a create")) {
            try WireCoding.decode(PushRequest.self, from: Data(body.utf8))
        }
    }
}
