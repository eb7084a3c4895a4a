import Foundation
import OutpostCore
import Testing

@Suite("JSON reader and writer", .timeLimit(.minutes(5)))
struct JSONScannerTests {
    @Test(arguments: [
        "{", "[1,]", "{\"a\":}", "{\"a\" 1}", "01", "1.", ".5", "-", "1e", "tru", "nul", "\"abc", "\"\\x\"",
        "\"tab\there\"", "{\"a\":1}}", "[1 2]", "{'a':1}", "NaN", "1e999", "\"\\u12G4\"",
    ])
    func malformedInputIsRefused(_ text: String) {
        #expect(throws: WireError.self) { _ = try JSONValue.parse(text) }
    }

    @Test func escapesAndUnicodeRoundTrip() throws {
        let value = try JSONValue.parse(#"{"s": "a\"b\\c\/d\n\t\u00e9\ud83d\ude00 ✓", "n": -12, "d": 2.5e3, "e": [], "o": {}}"#)
        #expect(value.objectValue?["s"] == .string("a\"b\\c/d\n\té😀 ✓"))
        #expect(value.objectValue?["n"] == .int(-12))
        #expect(value.objectValue?["d"] == .double(2500))
        let text = try value.jsonText()
        #expect(try JSONValue.parse(text) == value)
        #expect(text.contains(#""d":2500.0"#), "a whole double stays a double")
        // Otherwise the writer's text is the text Foundation's encoder writes.
        let plain = try JSONValue.parse(#"{"s": "a\"b/\u00e9\n", "n": [1, 2.25, true, null]}"#)
        #expect(try plain.jsonText() == String(decoding: try WireCoding.encode(plain), as: UTF8.self))
    }

    @Test func nestingIsBounded() {
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(throws: WireError.self) { _ = try JSONValue.parse(deep) }
        let fine = String(repeating: "[", count: 30) + String(repeating: "]", count: 30)
        #expect((try? JSONValue.parse(fine)) != nil)
    }

    @Test func skippingKeepsTheRawText() throws {
        var scanner = JSONScanner(Array(#"{"data": {"b": [1, {"c": "}"}], "a": null}, "x": 1}"#.utf8))
        try scanner.expect(UInt8(ascii: "{"))
        #expect(try scanner.readString() == "data")
        try scanner.expect(UInt8(ascii: ":"))
        let range = try scanner.skipValue()
        #expect(scanner.text(range) == #"{"b": [1, {"c": "}"}], "a": null}"#)
    }

    /// A payload sent on as text is checked without being built: the check
    /// must accept exactly the objects the parser accepts, or a change the
    /// device cannot read would be sent (or a good one held back).
    @Test(arguments: [
        "{}", #"{"a": 1, "b": [true, false, null, -0.5e3, {"c": "d"}]}"#, #"{"s": "a\"b\\c\/\n\u00e9\ud83d\ude00"}"#,
        "{", "[]", "1", #""text""#, #"{"a": 01}"#, #"{"a": 1.}"#, #"{"a": tru}"#, #"{"a": nul}"#, #"{"a": "\q"}"#,
        #"{"\x": 1}"#, #"{"a": "\u12G4"}"#, #"{"a": 1e999}"#, #"{"a": 1,}"#, #"{"a" 1}"#, #"{"a": 1} tail"#, #"{"a": "open}"#,
        "{\"a\": \"tab\there\"}", "{\"a\": " + String(repeating: "[", count: 70) + String(repeating: "]", count: 70) + "}",
    ])
    func checkingAnObjectAcceptsWhatParsingAccepts(_ text: String) {
        let parses = (try? JSONObject.parseObject(text)) != nil
        let checks = (try? JSONObject.checkObject(text)) != nil
        #expect(parses == checks, "parse \(parses), check \(checks): \(text)")
    }

    @Test func skippingAContainerInOneLoopKeepsItsTextAndRefusesBrokenOnes() throws {
        var scanner = JSONScanner(Array(#"  {"a": "x}]\"y", "b": [1, {"c": []}]} tail"#.utf8))
        let range = try scanner.skipContainer()
        #expect(scanner.text(range) == #"{"a": "x}]\"y", "b": [1, {"c": []}]}"#)
        for broken in [#"{"a": [1}"#, #"{"a": "open"#, "[[[", "{\"a\": \"\u{01}\"}", String(repeating: "[", count: 70) + String(repeating: "]", count: 70)] {
            var bad = JSONScanner(Array(broken.utf8))
            #expect(throws: JSONScanner.Failure.self, "\(broken)") { _ = try bad.skipContainer() }
        }
    }

    /// A quote, an escape or a control character is found at every offset
    /// of a string, beside characters of one to four bytes, and at the very
    /// end of the input.
    @Test func skippingAContainerFindsWhatEndsOrBreaksAStringAtEveryOffset() throws {
        func skip(_ text: String) throws -> Range<Int> {
            var scanner = JSONScanner(Array(text.utf8))
            return try scanner.skipContainer()
        }
        for filler in ["a", "\u{e9}", "\u{20ac}", "\u{1F600}"] {
            for length in 0..<20 {
                for offset in 0...length {
                    let before = String(repeating: filler, count: offset)
                    let after = String(repeating: filler, count: length - offset)
                    for escape in [#"\""#, #"\\"#, #"\n"#, #"\u00e9"#] {
                        let text = #"{"k": ""# + before + escape + after + #"", "n": [1]}"#
                        #expect(try skip(text) == 0..<text.utf8.count, "\(text)")
                    }
                    let early = #"{"k": ""# + before + #""}"# + after
                    #expect(try skip(early) == 0..<(early.utf8.count - after.utf8.count), "\(early)")
                    for control in ["\u{1F}", "\u{0}", "\n"] {
                        let broken = #"{"k": ""# + before + control + after + #""}"#
                        #expect(throws: JSONScanner.Failure.self, "\(broken)") { _ = try skip(broken) }
                    }
                    let unterminated = #"{"k": ""# + before + after
                    #expect(throws: JSONScanner.Failure.self, "\(unterminated)") { _ = try skip(unterminated) }
                }
            }
        }
    }

    @Test func rawPullPagesAreStrict() throws {
        let uuid = UUID().wireText
        let good = #"{"changes": [{"collection": "people", "uuid": "\#(uuid)", "id": 1, "version": 2, "updated_at": "2026-11-29T10:00:00.000000Z", "deleted": false, "owner": "u", "team": "t", "data": {"name": "Ana"}}, {"collection": "people", "uuid": "\#(uuid)", "deleted": true, "removed": true}], "cursor": "c", "has_more": false, "server_time": "2026-11-29T10:00:00.000000Z"}"#
        let page = try RawPullPage.parse(Data(good.utf8))
        #expect(page.changes.count == 2)
        #expect(page.changes[0].data.map(page.string) == #"{"name": "Ana"}"#)
        #expect(page.string(page.changes[0].uuid) == uuid)
        #expect(page.string(page.changes[0].owner) == "u")
        #expect(page.changes[1].removed)
        #expect(page.changes[1].data == nil)
        for broken in [
            good.replacingOccurrences(of: #""id": 1, "#, with: ""),
            good.replacingOccurrences(of: uuid, with: "nope"),
            good.replacingOccurrences(of: #"{"name": "Ana"}"#, with: #"[1]"#),
            good.replacingOccurrences(of: #""cursor": "c", "#, with: ""),
            good.replacingOccurrences(of: #""version": 2"#, with: #""version": "2""#),
            String(good.dropLast()),
            good.replacingOccurrences(of: #""owner": "u""#, with: #""owner": null"#),
            good.replacingOccurrences(of: #""owner": "u""#, with: #""owner": "\q""#),
        ] {
            #expect(throws: WireError.self) { _ = try RawPullPage.parse(Data(broken.utf8)) }
        }
    }

    @Test func rawPullPagesUnescapeAndRespellTextOutsideTheBody() throws {
        let uuid = UUID()
        let body = #"{"changes": [{"collection": "pe\u006fple", "uuid": "\#(uuid.uuidString)", "id": 1, "version": 2, "updated_at": "2026-11-29T10:00:00.000000Z", "deleted": false, "owner": "Jos\u00e9 \"J\"", "team": "", "data": {"note": "a\nb"}}, {"collection": "people", "uuid": "\#(uuid.wireText)", "id": 1, "version": 3, "updated_at": "2026-11-29T10:00:00.000000Z", "deleted": true, "owner": "u", "team": "t", "data": null}], "cursor": "c", "has_more": true, "server_time": "2026-11-29T10:00:00.000000Z"}"#
        let page = try RawPullPage.parse(Data(body.utf8))
        let first = page.changes[0]
        #expect(first.collection == "people")
        #expect(page.string(first.uuid) == uuid.wireText)
        #expect(page.uuid(first) == uuid)
        #expect(page.string(first.owner) == "José \"J\"")
        #expect(page.string(first.team) == "")
        // Data stays the server's text, escapes and all.
        #expect(first.data.map(page.string) == #"{"note": "a\nb"}"#)
        #expect(page.changes[1].deleted && page.changes[1].data == nil)
        #expect(page.changes[1].version == 3)
        #expect(page.hasMore)
        // The decoded form reads back to the same changes.
        let decoded = try WireCoding.decode(PullResponse.self, from: Data(body.utf8))
        let again = try RawPullPage(decoded)
        #expect(again.changes.count == 2)
        #expect(again.string(again.changes[0].owner) == "José \"J\"")
    }
}
