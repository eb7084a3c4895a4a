import Foundation
import OutpostCore
import Testing

/// The push's own writer and readers agree with the Codable forms they stand
/// in for: what one writes the other reads to the same value, and a body the
/// fast reader refuses is one the decoder refuses too (so its error is the
/// one the caller sees).
@Suite("Push bodies without Codable", .timeLimit(.minutes(5)))
struct PushWireTests {
    let client = UUID.fromWire("0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b")!
    let record = UUID.fromWire("0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6c")!
    let time = ServerTimestamp(rawValue: "2026-11-29T10:00:00.123456Z")
    /// Ids fixed once: the request is compared with what is read back.
    let ids = (0..<4).map { _ in UUID() }

    var request: PushRequest {
        PushRequest(
            clientID: client,
            mutations: [
                Mutation(
                    seq: 7, id: ids[0], op: .create, collection: "people", uuid: record,
                    data: [
                        "name": "Lucía \"Lu\" Romero\n\\", "section": 4, "ratio": 0.25, "tags": ["a", 1, nil, true],
                        "nested": ["deep": ["x": -3]], "empty": [:], "slash": "a/b", "emoji": "👷🏽‍♀️",
                    ],
                    deviceTime: time),
                Mutation(seq: 9, id: ids[1], op: .update, collection: "people", uuid: record, baseVersion: 88, data: ["phone": nil]),
                Mutation(seq: 12, id: ids[2], op: .delete, collection: "visits", uuid: ids[3], baseVersion: 90),
            ])
    }

    @Test func aRequestWrittenByHandReadsBackTheSameThroughBothReaders() throws {
        let bytes = request.wireBytes()
        #expect(PushRequest.readWire(bytes) == request)
        #expect(try WireCoding.decode(PushRequest.self, from: Data(bytes)) == request)
        // And what Foundation's encoder writes, the fast reader reads.
        #expect(PushRequest.readWire(Array(try WireCoding.encode(request))) == request)
    }

    @Test func aControlCharacterIsWrittenEscapedAndTheBodyTakesTheDecoder() throws {
        var request = request
        request.mutations[0].data?["notes"] = "a\u{0}b\u{1}c"
        let bytes = request.wireBytes()
        // Escaped as \u0000: the fast reader leaves such a body to the decoder, which reads it whole.
        #expect(PushRequest.readWire(bytes) == nil)
        #expect(try WireCoding.decode(PushRequest.self, from: Data(bytes)) == request)
    }

    @Test func wholeNumbersReadAsIntegersAsFoundationReadsThem() throws {
        let body = """
            {"client_id":"\(client.wireText)","mutations":[{"seq":1.0,"id":"\(record.wireText)","op":"create",
             "collection":"people","uuid":"\(record.wireText)","data":{"a":4.0,"b":1e2,"c":1.5,"d":[2.0,{"e":-0.0}],"f":12345678901234567890}}]}
            """
        let fast = try #require(PushRequest.readWire(Array(body.utf8)))
        let decoded = try WireCoding.decode(PushRequest.self, from: Data(body.utf8))
        #expect(fast == decoded)
        #expect(fast.mutations[0].data?["a"] == .int(4))
        #expect(fast.mutations[0].data?["b"] == .int(100))
        #expect(fast.mutations[0].data?["c"] == .double(1.5))
        #expect(fast.mutations[0].data?["d"] == .array([.int(2), .object(["e": .int(0)])]))
    }

    @Test(arguments: [
        #"{"seq":0,"id":"ID","op":"create","collection":"people","uuid":"UU","data":{}}"#,
        #"{"seq":1,"id":"ID","op":"create","collection":"people","uuid":"UU"}"#,
        #"{"seq":1,"id":"ID","op":"delete","collection":"people","uuid":"UU","data":{}}"#,
        #"{"seq":1,"id":"ID","op":"create","collection":"people","uuid":"UU","data":{},"base_version":3}"#,
        #"{"seq":1,"id":"ID","op":"Create","collection":"people","uuid":"UU","data":{}}"#,
        #"{"seq":1,"id":"not-a-uuid","op":"create","collection":"people","uuid":"UU","data":{}}"#,
        #"{"seq":1,"id":"ID","op":"create","collection":"","uuid":"UU","data":{}}"#,
        #"{"seq":1,"id":"ID","op":"create","collection":null,"uuid":"UU","data":{}}"#,
        #"{"seq":"1","id":"ID","op":"create","collection":"people","uuid":"UU","data":{}}"#,
        #"{"seq":1.5,"id":"ID","op":"create","collection":"people","uuid":"UU","data":{}}"#,
        #"{"seq":1,"id":"ID","op":"create","collection":"people","uuid":"UU","data":[]}"#,
        #"{"seq":1,"id":"ID","op":"update","collection":"people","uuid":"UU","data":{},"base_version":"3"}"#,
        #"{"seq":1,"id":"ID","op":"create","collection":"people","uuid":"UU","data":{},"device_time":"yesterday"}"#,
        #"{"seq":2,"id":"ID","op":"create","collection":"people","uuid":"UU","data":{}},{"seq":2,"id":"ID","op":"create","collection":"people","uuid":"UU","data":{}}"#,
        #"{"seq":1,"id":"ID","op":"create","collection":"\ud800","uuid":"UU","data":{}}"#,
        #"{"seq":1,"id":"ID","op":"create","collection":"people\udfff","uuid":"UU","data":{}}"#,
        #"{"seq":1,"id":"ID","op":"create","collection":"people","uuid":"UU","data":{"name":"\uZZZZ"}}"#,
    ])
    func aBodyTheFastReaderRefusesIsOneTheDecoderRefuses(_ mutation: String) {
        let body = #"{"client_id":"\#(client.wireText)","mutations":[\#(mutation)]}"#
            .replacingOccurrences(of: "\"ID\"", with: "\"\(UUID().wireText)\"")
            .replacingOccurrences(of: "\"UU\"", with: "\"\(record.wireText)\"")
        #expect(PushRequest.readWire(Array(body.utf8)) == nil)
        #expect(throws: WireError.self) { try WireCoding.decode(PushRequest.self, from: Data(body.utf8)) }
    }

    @Test(arguments: ["", "{", "[]", #"{"mutations":[]}"#, #"{"client_id":"x","mutations":[]}"#, #"{"client_id":"CID","mutations":[]} x"#])
    func aBrokenBodyIsRefused(_ body: String) {
        let body = body.replacingOccurrences(of: "CID", with: client.wireText)
        #expect(PushRequest.readWire(Array(body.utf8)) == nil)
        #expect(throws: (any Error).self) { try WireCoding.decode(PushRequest.self, from: Data(body.utf8)) }
    }

    @Test func anAnswerWrittenByHandReadsBackTheSameThroughBothReaders() throws {
        let stored = WireRecord(
            collection: "people", uuid: record, id: 41, version: 9001, updatedAt: time, deleted: false, owner: "ana", team: "north",
            data: ["name": "Ana", "n": 3, "x": 0.5], deviceTime: time)
        let tombstone = WireRecord(
            collection: "people", uuid: record, id: 41, version: 9002, updatedAt: time, deleted: true, owner: "ana", team: "north",
            data: nil)
        let results = [
            MutationResult(seq: 1, id: ids[0], status: .applied, record: stored),
            MutationResult(seq: 2, id: ids[1], status: .rejected, code: "invalid_field", errors: ["name": "must be text, \"not\" a number"]),
            MutationResult(seq: 3, id: ids[2], status: .conflict, record: tombstone),
            MutationResult(seq: 4, id: ids[3], status: .duplicate, record: stored, originalStatus: .applied),
            MutationResult(seq: 5, id: ids[0], status: .notFound, code: "not_found"),
        ]
        let written = try results.map { result in
            let record = try result.record.map { Array(try WireCoding.encode($0)) }
            var out: [UInt8] = []
            MutationResult.appendWire(
                seq: result.seq, id: result.id, status: result.status, originalStatus: result.originalStatus, code: result.code,
                errors: result.errors, record: record.map { bytes in { $0 += bytes } }, to: &out)
            return out
        }
        let answer = PushResponse(results: results, lastSeq: 5, serverTime: time)
        let bytes = PushResponse.wireBytes(results: written, lastSeq: 5, serverTime: time)
        #expect(PushResponse.readWire(bytes) == answer)
        #expect(try WireCoding.decode(PushResponse.self, from: Data(bytes)) == answer)
        #expect(PushResponse.readWire(Array(try WireCoding.encode(answer))) == answer)
    }

    /// The engine reads answers keeping an applied result's data as text
    /// only (settling stores that text); every other result's data is read
    /// into values as before, and the answer is otherwise the same.
    @Test func anAppliedResultsDataIsKeptAsTextOnlyWhenAsked() throws {
        let stored = WireRecord(
            collection: "people", uuid: record, id: 41, version: 9001, updatedAt: time, deleted: false, owner: "ana", team: "north",
            data: ["name": "Ana", "n": 3, "x": 0.5], deviceTime: time)
        let results = [
            MutationResult(seq: 1, id: ids[0], status: .applied, record: stored),
            MutationResult(seq: 2, id: ids[1], status: .conflict, record: stored),
            MutationResult(seq: 3, id: ids[2], status: .duplicate, record: stored, originalStatus: .applied),
        ]
        let bytes = Array(try WireCoding.encode(PushResponse(results: results, lastSeq: 3, serverTime: time)))
        let read = try #require(PushResponse.readWire(bytes, deferringAppliedData: true))
        #expect(read.deferredRecordData == [1])
        #expect(read.results[0].record?.data == [:], "left for settling to read from the text")
        #expect(try MutationResult.readObject(try #require(read.recordDataTexts[1])) == .some(stored.data))
        #expect(read.results[1].record == stored && read.results[2].record == stored, "a conflict's and a duplicate's data are read")
        var whole = read
        whole.results[0].record?.data = stored.data
        #expect(whole == PushResponse(results: results, lastSeq: 3, serverTime: time))
        #expect(PushResponse.readWire(bytes)?.deferredRecordData == [], "not asked: nothing deferred")

        // Kept as text, an applied result's data is still checked as a pull
        // page's payloads are: brackets that do not close refuse the answer.
        // (Only the first result's: the others are read whole anyway.)
        var broken = String(decoding: bytes, as: UTF8.self)
        let first = try #require(broken.range(of: #""x":0.5}"#))
        broken.replaceSubrange(first, with: #""x":[0.5}"#)
        #expect(PushResponse.readWire(Array(broken.utf8), deferringAppliedData: true) == nil)
    }

    @Test(arguments: [
        #"{"results":[{"seq":1,"id":"ID","status":"applied"}],"last_seq":1,"server_time":"TIME"}"#,
        #"{"results":[{"seq":1,"id":"ID","status":"done"}],"last_seq":1,"server_time":"TIME"}"#,
        #"{"results":[],"last_seq":1,"server_time":"now"}"#,
        #"{"results":[],"server_time":"TIME"}"#,
        #"{"results":[{"seq":1,"id":"ID","status":"conflict","record":{"collection":"people","uuid":"ID","id":1,"version":2,"updated_at":"TIME","deleted":false,"owner":"a","team":"t","data":null}}],"last_seq":1,"server_time":"TIME"}"#,
        #"{"results":[{"seq":1,"id":"ID","status":"rejected","errors":{"name":3}}],"last_seq":1,"server_time":"TIME"}"#,
    ])
    func anAnswerTheFastReaderRefusesIsOneTheDecoderRefuses(_ body: String) {
        let body = body.replacingOccurrences(of: "ID", with: record.wireText).replacingOccurrences(of: "TIME", with: time.rawValue)
        #expect(PushResponse.readWire(Array(body.utf8)) == nil)
        #expect(throws: WireError.self) { try WireCoding.decode(PushResponse.self, from: Data(body.utf8)) }
    }
}
