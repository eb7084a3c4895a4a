import Foundation

/// Writes `JSONValue`s as canonical text: keys sorted, no insignificant
/// whitespace, slashes unescaped — the text `WireCoding.encoder()` writes
/// (but for whole doubles, see `format`), without going through Codable.
public enum JSONWriter {
    public static func write(_ value: JSONValue, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: [110, 117, 108, 108])
        case .bool(let flag): out.append(contentsOf: flag ? Array("true".utf8) : Array("false".utf8))
        case .int(let number): out.append(contentsOf: String(number).utf8)
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

    public static func text(_ value: JSONValue) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(value, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    public static func writeString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
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
