public import Foundation

/// The JSON coders every wire body goes through, configured once.
public enum WireCoding {
    /// Sorted keys make stored payloads and test fixtures byte-stable.
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    public static func decoder() -> JSONDecoder {
        JSONDecoder()
    }

    /// Encodes a wire body to bytes.
    public static func encode<T: Encodable>(_ value: T) throws -> Data {
        try encoder().encode(value)
    }

    /// Decodes a wire body, turning Foundation's decoding errors into a
    /// `WireError` that names the field at fault in plain words.
    public static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        do {
            return try decoder().decode(type, from: data)
        } catch let error as WireError {
            throw error
        } catch let error as DecodingError {
            throw WireError(error)
        } catch {
            throw WireError(path: "", problem: "could not be read: \(error)")
        }
    }
}
