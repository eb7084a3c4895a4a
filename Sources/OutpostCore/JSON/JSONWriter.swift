import Foundation

/// Writes `JSONValue`s as canonical text: keys sorted, no insignificant
/// whitespace, slashes unescaped — the text `WireCoding.encoder()` writes
/// (but for whole doubles, see `format`), without going through Codable.
package enum JSONWriter {
    package static func write(_ value: JSONValue, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: [110, 117, 108, 108])
        case .bool(let flag): out.append(contentsOf: flag ? Array("true".utf8) : Array("false".utf8))
        case .int(let number): writeInteger(number, to: &out)
        case .double(let number): out.append(contentsOf: format(number).utf8)
        case .string(let text): writeString(text, to: &out)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (offset, element) in values.enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                write(element, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            for (offset, key) in object.keys.sorted().enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                writeString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                write(object[key]!, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    package static func text(_ value: JSONValue) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(value, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    package static func writeString(_ text: String, to out: inout [UInt8]) {
        // Through the contiguous UTF-8, so text without escapes is copied in one go.
        var text = text
        text.withUTF8 { writeString(utf8: $0, to: &out) }
    }

    /// The same from UTF-8 bytes (a database column read in place): text
    /// that needs no escapes is copied in one go.
    package static func writeString(utf8 bytes: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        guard bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: bytes)
            out.append(UInt8(ascii: "\""))
            return
        }
        writeEscaped(bytes, to: &out)
    }

    /// Writes an integer's digits without making a String.
    package static func writeInteger(_ number: Int64, to out: inout [UInt8]) {
        if number < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = number.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 20 digits at most, written backwards
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[19 - count] = UInt8(truncatingIfNeeded: magnitude % 10) + 48
                magnitude /= 10
                count += 1
            } while magnitude > 0
            out.append(contentsOf: buffer[(20 - count)..<20])
        }
    }

    private static func writeEscaped<Bytes: Sequence<UInt8>>(_ bytes: Bytes, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [92, 34])
            case UInt8(ascii: "\\"): out.append(contentsOf: [92, 92])
            case 0x0A: out.append(contentsOf: [92, 110])
            case 0x0D: out.append(contentsOf: [92, 114])
            case 0x09: out.append(contentsOf: [92, 116])
            case 0x08: out.append(contentsOf: [92, 98])
            case 0x0C: out.append(contentsOf: [92, 102])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [92, 117, 48, 48, hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Shortest round-tripping text. A whole double keeps its ".0" so that it
    /// reads back as a double (Foundation would write "2500", read back as an integer).
    static func format(_ number: Double) -> String {
        if number.rounded() == number, abs(number) < 1e15 { return String(Int64(number)) + ".0" }
        return "\(number)"
    }
}
