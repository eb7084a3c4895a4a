import Foundation
import OutpostCore
import Testing

/// Strings and containers are walked eight bytes at a time: whatever ends
/// or breaks them must be found at every offset of a word, beside bytes of
/// every kind (multi-byte UTF-8 has its high bits set), and in the tail
/// shorter than a word.
@Suite("JSON walked a word at a time", .timeLimit(.minutes(2)))
struct JSONStopsTests {
    static let fillers = ["a", " ", "~", "\u{7F}", "\u{e9}", "\u{20ac}", "\u{1F600}", "!", "#", "Z", "z", "|"]

    @Test func aStringEndsOrBreaksAtEveryOffset() throws {
        for filler in Self.fillers {
            for length in 0..<18 {
                for offset in 0...length {
                    let before = String(repeating: filler, count: offset)
                    let after = String(repeating: filler, count: length - offset)
                    var scanner = JSONScanner(Array(("\"" + before + "\"" + after).utf8))
                    let span = try scanner.readStringSpan()
                    #expect(span.content == 1..<(1 + before.utf8.count), "\(before)|\(after)")
                    #expect(!span.escaped)
                    var escaped = JSONScanner(Array(("\"" + before + #"\"\\"# + after + "\"").utf8))
                    let escapedSpan = try escaped.readStringSpan()
                    #expect(escapedSpan.escaped)
                    #expect(escapedSpan.content.upperBound == escaped.index - 1)
                    #expect(escaped.index == ("\"" + before + #"\"\\"# + after + "\"").utf8.count)
                    for control in ["\u{0}", "\u{1F}", "\t", "\n"] {
                        var broken = JSONScanner(Array(("\"" + before + control + after + "\"").utf8))
                        #expect(throws: JSONScanner.Failure.self) { _ = try broken.readStringSpan() }
                    }
                    var open = JSONScanner(Array(("\"" + before + after).utf8))
                    #expect(throws: JSONScanner.Failure.self) { _ = try open.readStringSpan() }
                    // A backslash that is the input's last byte escapes nothing.
                    var cut = JSONScanner(Array(("\"" + before + "\\").utf8))
                    #expect(throws: JSONScanner.Failure.self) { _ = try cut.readStringSpan() }
                }
            }
        }
    }

    @Test func bracketsAreFoundAtEveryOffsetBetweenStrings() throws {
        for filler in [" ", "1", "\n", "t", "\u{7B}\u{7D}", "[]", "\"\"", "\"x\"", "\u{e9}"] {
            for length in 0..<18 {
                for offset in 0...length {
                    let before = String(repeating: filler, count: offset)
                    let after = String(repeating: filler, count: length - offset)
                    for (open, close) in [("{", "}"), ("[", "]")] {
                        let text = open + before + "[" + after + "]" + close + " tail"
                        var scanner = JSONScanner(Array(text.utf8))
                        #expect(try scanner.skipContainer() == 0..<(text.utf8.count - 5), "\(text)")
                        let unbalanced = open + before + "[" + after + "}" + close
                        var bad = JSONScanner(Array(unbalanced.utf8))
                        #expect(throws: JSONScanner.Failure.self, "\(unbalanced)") { _ = try bad.skipContainer() }
                        let unclosed = open + before + after
                        var short = JSONScanner(Array(unclosed.utf8))
                        #expect(throws: JSONScanner.Failure.self, "\(unclosed)") { _ = try short.skipContainer() }
                    }
                }
            }
        }
    }

    /// Bytes one off from a stop (`!` and `#` beside `"`, `Z` `\` `^`, `z` `|` `~`
    /// beside the brackets, 0x20 and 0x7F) are never taken for one.
    @Test func neighboursOfTheStopsAreNotStops() throws {
        let neighbours = "!#Z^z|~\u{7F} \u{5A}\u{5E}\u{7A}\u{7C}\u{3B}\u{3D}"
        let text = #"{"k": ""# + String(repeating: neighbours, count: 3) + #"", "n": "# + "1" + String(repeating: " ", count: 9) + "}"
        var scanner = JSONScanner(Array(text.utf8))
        #expect(try scanner.skipContainer() == 0..<text.utf8.count)
    }
}
