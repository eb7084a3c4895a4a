package import Foundation

/// A strict JSON reader over UTF-8 bytes (RFC 8259), written for the hot
/// paths: stored record data and pull pages. Foundation's coders cost more
/// than SQLite and HTTP together on a naive sync path (docs/benchmarks.md); this one
/// builds `JSONValue`s directly and can skip a value while keeping its raw
/// text, so payloads the client only stores are never decoded.
package struct JSONScanner {
    let bytes: [UInt8]
    package private(set) var index = 0
    /// Nesting deeper than this is refused, never recursed into.
    package static let maxDepth = 64
    /// Members a record's object has room for before its table grows (the
    /// parser's and the typed encoder's).
    static let fieldsAtOnce = 8

    package init(_ bytes: [UInt8]) { self.bytes = bytes }
    package init(_ data: Data) { self.bytes = [UInt8](data) }

    package struct Failure: Error, Sendable, Equatable {
        package var offset: Int
        package var reason: String
    }

    func fail(_ reason: String) -> Failure { Failure(offset: index, reason: reason) }

    package mutating func skipWhitespace() {
        let start = index
        index = bytes.withUnsafeBufferPointer { buffer in
            var position = start
            while position < buffer.count {
                switch buffer[position] {
                case 0x20, 0x0A, 0x0D, 0x09: position += 1
                default: return position
                }
            }
            return position
        }
    }

    /// The next significant byte, without consuming it.
    package mutating func peek() throws -> UInt8 {
        skipWhitespace()
        guard index < bytes.count else { throw fail("unexpected end of input") }
        return bytes[index]
    }

    package mutating func expect(_ byte: UInt8) throws {
        guard try peek() == byte else { throw fail("expected '\(Character(UnicodeScalar(byte)))'") }
        index += 1
    }

    /// Consumes `byte` if it comes next.
    package mutating func consume(_ byte: UInt8) throws -> Bool {
        if try peek() == byte {
            index += 1
            return true
        }
        return false
    }

    package mutating func atEnd() -> Bool {
        skipWhitespace()
        return index == bytes.count
    }

    // MARK: Values

    package mutating func readValue(depth: Int = 0) throws -> JSONValue {
        guard depth <= Self.maxDepth else { throw fail("nested too deeply") }
        switch try peek() {
        case UInt8(ascii: "{"):
            index += 1
            if try consume(UInt8(ascii: "}")) { return .object([:]) }
            // Room for a record's fields at once: grown from empty, the
            // table was rehashed as each record was read. (Nested objects,
            // often a few members each, grow as they fill.)
            var object = depth == 0 ? JSONObject(minimumCapacity: Self.fieldsAtOnce) : [:]
            repeat {
                let key = try readString()
                try expect(UInt8(ascii: ":"))
                object[key] = try readValue(depth: depth + 1)
            } while try consume(UInt8(ascii: ","))
            try expect(UInt8(ascii: "}"))
            return .object(object)
        case UInt8(ascii: "["):
            index += 1
            var array: [JSONValue] = []
            if try consume(UInt8(ascii: "]")) { return .array(array) }
            repeat { array.append(try readValue(depth: depth + 1)) } while try consume(UInt8(ascii: ","))
            try expect(UInt8(ascii: "]"))
            return .array(array)
        case UInt8(ascii: "\""):
            return .string(try readString())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        default:
            return try readNumber()
        }
    }

    /// Skips one value and returns its raw text (e.g. a record's `data`, kept verbatim).
    /// With `checkingEscapes`, each string's escapes are decoded too, so
    /// what it accepts is exactly what `readValue` accepts, without building
    /// a value: a payload sent on as text is checked at the cost of a walk.
    package mutating func skipValue(depth: Int = 0, checkingEscapes: Bool = false) throws -> Range<Int> {
        guard depth <= Self.maxDepth else { throw fail("nested too deeply") }
        let first = try peek()
        let start = index
        switch first {
        case UInt8(ascii: "{"):
            index += 1
            if !(try consume(UInt8(ascii: "}"))) {
                repeat {
                    try skipString(checkingEscapes: checkingEscapes)
                    try expect(UInt8(ascii: ":"))
                    _ = try skipValue(depth: depth + 1, checkingEscapes: checkingEscapes)
                } while try consume(UInt8(ascii: ","))
                try expect(UInt8(ascii: "}"))
            }
        case UInt8(ascii: "["):
            index += 1
            if !(try consume(UInt8(ascii: "]"))) {
                repeat { _ = try skipValue(depth: depth + 1, checkingEscapes: checkingEscapes) } while try consume(UInt8(ascii: ","))
                try expect(UInt8(ascii: "]"))
            }
        case UInt8(ascii: "\""):
            try skipString(checkingEscapes: checkingEscapes)
        default:
            _ = try readValue(depth: depth)
        }
        return start..<index
    }

    /// Skips a string; with `checkingEscapes`, decodes its escapes (into a
    /// scratch buffer) when it has any, failing where `readString` would.
    private mutating func skipString(checkingEscapes: Bool) throws {
        let (content, escaped) = try readStringSpan()
        if checkingEscapes && escaped {
            var scratch: [UInt8] = []
            try unescape(content, into: &scratch)
        }
    }

    /// Skips an object or array in one tight loop: strings closed, brackets
    /// balanced, no control characters in strings, nesting bounded. Used for
    /// record payloads the device stores without reading (a recursive walk
    /// costs several times more per byte); the payload is fully parsed later,
    /// whenever the app reads it.
    package mutating func skipContainer() throws -> Range<Int> {
        let first = try peek()
        guard first == UInt8(ascii: "{") || first == UInt8(ascii: "[") else { throw fail("expected an object or array") }
        let start = index
        let maxDepth = Self.maxDepth
        let outcome: (end: Int, error: String?) = bytes.withUnsafeBufferPointer { buffer in
            let base = buffer.baseAddress!
            let count = buffer.count
            var position = start
            // Open brackets as bits (1 = array), so nesting costs no allocation.
            var kinds: UInt64 = 0
            var depth = 0
            while true {
                // Only quotes and brackets matter between strings.
                position = JSONStops.nextInStructure(base, from: position, count: count)
                guard position < count else { break }
                let byte = base[position]
                if byte == 0x22 {
                    // A string: only quotes, escapes and control characters matter.
                    position += 1
                    while true {
                        position = JSONStops.nextInString(base, from: position, count: count)
                        guard position < count else { return (count, "unexpected end of input") }
                        let inner = base[position]
                        if inner == 0x22 { break }
                        if inner == 0x5C {
                            position += 2
                            continue
                        }
                        return (position, "control character in a string")
                    }
                } else if byte == 0x7B || byte == 0x5B {
                    guard depth < maxDepth else { return (position, "nested too deeply") }
                    kinds = kinds << 1 | (byte == 0x5B ? 1 : 0)
                    depth += 1
                } else {
                    guard depth > 0, (kinds & 1 == 1) == (byte == 0x5D) else { return (position, "unbalanced brackets") }
                    kinds >>= 1
                    depth -= 1
                    if depth == 0 { return (position + 1, nil) }
                }
                position += 1
            }
            return (count, "unexpected end of input")
        }
        index = outcome.end
        if let error = outcome.error { throw fail(error) }
        return start..<outcome.end
    }

    /// Reads an object key and tells which of `names` it is (nil for any
    /// other), comparing bytes rather than building a String.
    package mutating func readKey(_ names: [[UInt8]]) throws -> Int? {
        let content = try readStringSpan().content
        return bytes.withUnsafeBufferPointer { buffer in
            let key = UnsafeBufferPointer(rebasing: buffer[content])
            for (offset, name) in names.enumerated() where name.count == key.count {
                if name.withUnsafeBufferPointer({ memcmp($0.baseAddress!, key.baseAddress!, key.count) == 0 }) { return offset }
            }
            return nil
        }
    }

    /// Reads a string and returns where its content lies (without the
    /// quotes) and whether it holds escapes: a string without escapes is its
    /// own UTF-8 text, so a caller can use the bytes in place.
    package mutating func readStringSpan() throws -> (content: Range<Int>, escaped: Bool) {
        let (range, escaped) = try skipString()
        return ((range.lowerBound + 1)..<(range.upperBound - 1), escaped)
    }

    /// Calls `body` with the bytes of `range` (e.g. a span from `readStringSpan`).
    package func withBytes<R>(_ range: Range<Int>, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try bytes.withUnsafeBufferPointer { try body(UnsafeBufferPointer(rebasing: $0[range])) }
    }

    /// Reads a string value (for known string fields, without building a `JSONValue`).
    package mutating func readStringValue() throws -> String? {
        if try peek() == UInt8(ascii: "n") {
            try literal("null")
            return nil
        }
        return try readString()
    }

    /// Reads an integer value.
    package mutating func readIntegerValue() throws -> Int64? {
        skipWhitespace()
        if case .int(let value) = try readNumber() { return value }
        return nil
    }

    /// Reads true or false.
    package mutating func readBoolValue() throws -> Bool {
        switch try peek() {
        case UInt8(ascii: "t"):
            try literal("true")
            return true
        case UInt8(ascii: "f"):
            try literal("false")
            return false
        default: throw fail("expected true or false")
        }
    }

    package func text(_ range: Range<Int>) -> String {
        String(decoding: bytes[range], as: UTF8.self)
    }

    private mutating func literal(_ word: StaticString) throws {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw fail("unexpected end of input") }
        let matches = word.withUTF8Buffer { expected in
            (0..<count).allSatisfy { bytes[index + $0] == expected[$0] }
        }
        guard matches else { throw fail("unexpected character") }
        index += count
    }

    package mutating func readNumber() throws -> JSONValue {
        let start = index
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, (48...57).contains(bytes[index]) else { throw fail("expected a value") }
        if bytes[index] == 48 {
            index += 1
        } else {
            while index < bytes.count, (48...57).contains(bytes[index]) { index += 1 }
        }
        var isInteger = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < bytes.count, (48...57).contains(bytes[index]) else { throw fail("expected digits after '.'") }
            while index < bytes.count, (48...57).contains(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, (48...57).contains(bytes[index]) else { throw fail("expected an exponent") }
            while index < bytes.count, (48...57).contains(bytes[index]) { index += 1 }
        }
        if isInteger, index - start <= 18 {
            // Fits in Int64 for sure: read the digits directly.
            var value: Int64 = 0
            var position = start
            let negative = bytes[position] == UInt8(ascii: "-")
            if negative { position += 1 }
            while position < index {
                value = value * 10 + Int64(bytes[position] - 48)
                position += 1
            }
            return .int(negative ? -value : value)
        }
        let text = text(start..<index)
        if isInteger, let integer = Int64(text) { return .int(integer) }
        guard let double = Double(text), double.isFinite else { throw fail("number out of range") }
        return .double(double)
    }

    /// Reads a string, decoding escapes.
    package mutating func readString() throws -> String {
        let (content, escaped) = try readStringSpan()
        // Most strings have no escapes: take the bytes as they are.
        guard escaped else { return text(content) }
        var decoded: [UInt8] = []
        try unescape(content, into: &decoded)
        return String(decoding: decoded, as: UTF8.self)
    }

    /// Appends the UTF-8 text of a string's content with its escapes decoded
    /// (`content` as returned by `readStringSpan`). A lone surrogate becomes U+FFFD.
    package func unescape(_ content: Range<Int>, into out: inout [UInt8]) throws {
        out.reserveCapacity(out.count + content.count)
        var position = content.lowerBound
        while position < content.upperBound {
            let byte = bytes[position]
            guard byte == UInt8(ascii: "\\") else {
                out.append(byte)
                position += 1
                continue
            }
            let escape = bytes[position + 1]
            position += 2
            switch escape {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var code = try hex4(at: position)
                position += 4
                if (0xD800...0xDBFF).contains(code), position + 6 <= content.upperBound, bytes[position] == UInt8(ascii: "\\"),
                    bytes[position + 1] == UInt8(ascii: "u")
                {
                    let low = try hex4(at: position + 2)
                    if (0xDC00...0xDFFF).contains(low) {
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        position += 6
                    }
                }
                UTF8.encode(Unicode.Scalar(code) ?? "\u{FFFD}") { out.append($0) }
            default:
                throw Failure(offset: position - 1, reason: "invalid escape in a string")
            }
        }
    }

    private func hex4(at position: Int) throws -> UInt32 {
        guard position + 4 <= bytes.count else { throw fail("unexpected end of input") }
        var value: UInt32 = 0
        for offset in 0..<4 {
            let byte = bytes[position + offset]
            let digit: UInt32
            switch byte {
            case 48...57: digit = UInt32(byte - 48)
            case 65...70: digit = UInt32(byte - 55)
            case 97...102: digit = UInt32(byte - 87)
            default: throw fail("invalid \\u escape")
            }
            value = value << 4 | digit
        }
        return value
    }

    /// Skips a string, checking control characters; returns its range with
    /// the quotes and whether it holds escapes (checked when decoded).
    private mutating func skipString() throws -> (range: Range<Int>, escaped: Bool) {
        guard try peek() == UInt8(ascii: "\"") else { throw fail("expected a string") }
        let start = index
        // The hottest loop of a download: walk the bytes without bounds checks.
        let (end, escaped): (Int?, Bool) = bytes.withUnsafeBufferPointer { buffer in
            let base = buffer.baseAddress!
            let count = buffer.count
            var position = start + 1
            var escaped = false
            while true {
                position = JSONStops.nextInString(base, from: position, count: count)
                guard position < count else { return (nil, escaped) }
                let byte = base[position]
                if byte == 0x22 { return (position + 1, escaped) }
                guard byte == 0x5C else { return (-position - 1, escaped) }
                escaped = true
                position += 2
            }
        }
        guard let end else { throw fail("unterminated string") }
        if end < 0 {
            index = -end - 1
            throw fail("control character in a string")
        }
        index = end
        return (start..<end, escaped)
    }
}
