package import Foundation

/// Helpers that keep wire decoding strict: UUIDs must be RFC 4122 text and are
/// always written lowercase (Foundation writes them uppercase).
extension KeyedDecodingContainer {
    package func decodeUUID(forKey key: Key) throws -> UUID {
        let text = try decode(String.self, forKey: key)
        guard let uuid = UUID.fromWire(text) else {
            throw DecodingError.dataCorruptedError(
                forKey: key, in: self, debugDescription: "must be a UUID such as 0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b")
        }
        return uuid
    }

    package func decodeUUIDIfPresent(forKey key: Key) throws -> UUID? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        return try decodeUUID(forKey: key)
    }

    /// Decodes a string that must not be empty.
    package func decodeNonEmpty(_ key: Key) throws -> String {
        let text = try decode(String.self, forKey: key)
        guard !text.isEmpty else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "must not be empty")
        }
        return text
    }
}

extension KeyedEncodingContainer {
    package mutating func encodeUUID(_ uuid: UUID, forKey key: Key) throws {
        try encode(uuid.wireText, forKey: key)
    }
}

extension UUID {
    /// The protocol's spelling: lowercase RFC 4122 text.
    ///
    /// Written by hand: Foundation formats and parses UUIDs through
    /// printf/scanf, which shows in profiles of a 235,000-record download.
    package var wireText: String {
        // No lookup table or buffer but the string's own: this runs for
        // every record a device or a server reads or writes.
        withUnsafeBytes(of: uuid) { raw in
            String(unsafeUninitializedCapacity: 36) { out in
                var position = 0
                for index in 0..<16 {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        out[position] = UInt8(ascii: "-")
                        position += 1
                    }
                    let byte = raw[index]
                    out[position] = Self.hexDigit(byte >> 4)
                    out[position + 1] = Self.hexDigit(byte & 0x0F)
                    position += 2
                }
                return 36
            }
        }
    }

    @inline(__always) private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? nibble &+ 48 : nibble &+ 87
    }

    /// Whether the bytes are a UUID in the protocol's exact spelling
    /// (lowercase), so the text can be stored as it is without parsing it.
    package static func isWireSpelling(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        guard utf8.count == 36 else { return false }
        for (position, byte) in utf8.enumerated() {
            if position == 8 || position == 13 || position == 18 || position == 23 {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                guard (48...57).contains(byte) || (97...102).contains(byte) else { return false }
            }
        }
        return true
    }

    /// Parses the protocol's spelling (36 characters, hex and hyphens, either case).
    package static func fromWire(_ text: String) -> UUID? {
        var text = text
        return text.withUTF8 { fromWire($0) }
    }

    /// The same, from UTF-8 bytes.
    package static func fromWire<Bytes: RandomAccessCollection>(_ utf8: Bytes) -> UUID?
    where Bytes.Element == UInt8, Bytes.Index == Int {
        guard utf8.count == 36 else { return nil }
        let base = utf8.startIndex
        // Read into the tuple itself: a heap buffer per parse showed in
        // profiles of settling a push's answer.
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let parsed = withUnsafeMutableBytes(of: &value) { bytes -> Bool in
            var position = 0
            for index in 0..<16 {
                if position == 8 || position == 13 || position == 18 || position == 23 {
                    guard utf8[base + position] == UInt8(ascii: "-") else { return false }
                    position += 1
                }
                guard let high = hexValue(utf8[base + position]), let low = hexValue(utf8[base + position + 1]) else {
                    return false
                }
                bytes[index] = high << 4 | low
                position += 2
            }
            return true
        }
        return parsed ? UUID(uuid: value) : nil
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 48...57: return byte - 48
        case 65...70: return byte - 55
        case 97...102: return byte - 87
        default: return nil
        }
    }
}
