public import Foundation

/// Helpers that keep wire decoding strict: UUIDs must be RFC 4122 text and are
/// always written lowercase (Foundation writes them uppercase).
extension KeyedDecodingContainer {
    public func decodeUUID(forKey key: Key) throws -> UUID {
        let text = try decode(String.self, forKey: key)
        guard let uuid = UUID.fromWire(text) else {
            throw DecodingError.dataCorruptedError(
                forKey: key, in: self, debugDescription: "must be a UUID such as 0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b")
        }
        return uuid
    }

    public func decodeUUIDIfPresent(forKey key: Key) throws -> UUID? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        return try decodeUUID(forKey: key)
    }

    /// Decodes a string that must not be empty.
    public func decodeNonEmpty(_ key: Key) throws -> String {
        let text = try decode(String.self, forKey: key)
        guard !text.isEmpty else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "must not be empty")
        }
        return text
    }
}

extension KeyedEncodingContainer {
    public mutating func encodeUUID(_ uuid: UUID, forKey key: Key) throws {
        try encode(uuid.wireText, forKey: key)
    }
}

extension UUID {
    /// The protocol's spelling: lowercase RFC 4122 text.
    ///
    /// Written by hand: Foundation formats and parses UUIDs through
    /// printf/scanf, which shows in profiles of a 235,000-record download.
    public var wireText: String {
        let hex = Array("0123456789abcdef".utf8)
        let bytes = uuid
        return withUnsafeBytes(of: bytes) { raw in
            String(unsafeUninitializedCapacity: 36) { out in
                var position = 0
                for (index, byte) in raw.enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        out[position] = UInt8(ascii: "-")
                        position += 1
                    }
                    out[position] = hex[Int(byte >> 4)]
                    out[position + 1] = hex[Int(byte & 0x0F)]
                    position += 2
                }
                return 36
            }
        }
    }

    /// Whether the bytes are a UUID in the protocol's exact spelling
    /// (lowercase), so the text can be stored as it is without parsing it.
    public static func isWireSpelling(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
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
    public static func fromWire(_ text: String) -> UUID? {
        var text = text
        return text.withUTF8 { fromWire($0) }
    }

    /// The same, from UTF-8 bytes.
    public static func fromWire<Bytes: RandomAccessCollection>(_ utf8: Bytes) -> UUID?
    where Bytes.Element == UInt8, Bytes.Index == Int {
        guard utf8.count == 36 else { return nil }
        let base = utf8.startIndex
        var bytes = [UInt8](repeating: 0, count: 16)
        var position = 0
        for index in 0..<16 {
            if position == 8 || position == 13 || position == 18 || position == 23 {
                guard utf8[base + position] == UInt8(ascii: "-") else { return nil }
                position += 1
            }
            guard let high = hexValue(utf8[base + position]), let low = hexValue(utf8[base + position + 1]) else {
                return nil
            }
            bytes[index] = high << 4 | low
            position += 2
        }
        return UUID(uuid: (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
            bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
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
