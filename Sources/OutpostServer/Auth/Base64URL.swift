import Foundation

/// Base64url without padding (RFC 4648 §5): how JOSE writes JWTs, and how
/// this server writes its opaque tokens and pull cursors.
///
/// Written out by hand: a live stream encodes a cursor for every event it
/// sends, and Foundation's route (base64, then three string replacements
/// through NSString) was 2% of a process serving 1,000 streams.
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Each byte's value in the alphabet, or 0xFF when it is not in it.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    /// The bytes `text` stands for; nil when it holds anything outside the
    /// alphabet (padding included) or its length cannot end a group.
    static func decode(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { input -> [UInt8]? in
            guard input.count % 4 != 1 else { return nil }
            var out: [UInt8] = []
            out.reserveCapacity(input.count * 3 / 4)
            var group: UInt32 = 0
            var filled = 0
            for byte in input {
                let value = values[Int(byte)]
                guard value != 0xFF else { return nil }
                group = group << 6 | UInt32(value)
                filled += 1
                if filled == 4 {
                    out.append(UInt8(truncatingIfNeeded: group >> 16))
                    out.append(UInt8(truncatingIfNeeded: group >> 8))
                    out.append(UInt8(truncatingIfNeeded: group))
                    group = 0
                    filled = 0
                }
            }
            // A last group of 2 or 3 characters holds 1 or 2 bytes.
            if filled == 2 {
                out.append(UInt8(truncatingIfNeeded: group >> 4))
            } else if filled == 3 {
                out.append(UInt8(truncatingIfNeeded: group >> 10))
                out.append(UInt8(truncatingIfNeeded: group >> 2))
            }
            return out
        }
    }

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index + 3 <= bytes.count {
            let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            out.append(alphabet[Int(group >> 18 & 63)])
            out.append(alphabet[Int(group >> 12 & 63)])
            out.append(alphabet[Int(group >> 6 & 63)])
            out.append(alphabet[Int(group & 63)])
            index += 3
        }
        switch bytes.count - index {
        case 1:
            let group = UInt32(bytes[index]) << 16
            out.append(alphabet[Int(group >> 18 & 63)])
            out.append(alphabet[Int(group >> 12 & 63)])
        case 2:
            let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            out.append(alphabet[Int(group >> 18 & 63)])
            out.append(alphabet[Int(group >> 12 & 63)])
            out.append(alphabet[Int(group >> 6 & 63)])
        default:
            break
        }
        return String(decoding: out, as: UTF8.self)
    }
}
