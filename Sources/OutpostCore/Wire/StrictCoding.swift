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
    public var wireText: String { uuidString.lowercased() }

    /// Parses the protocol's spelling (36 characters, hex and hyphens).
    public static func fromWire(_ text: String) -> UUID? {
        guard text.utf8.count == 36 else { return nil }
        return UUID(uuidString: text)
    }
}
