import Foundation
import OutpostCore
import Testing

@Suite("JSON reader and writer")
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
}
