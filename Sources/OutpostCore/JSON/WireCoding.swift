package import Foundation

/// The JSON coders every wire body goes through, configured once.
package enum WireCoding {
    /// Sorted keys make stored payloads and test fixtures byte-stable.
    package static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Dates as the server writes times: RFC 3339 UTC with microseconds.
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(ServerTimestamp(date).rawValue)
        }
        return encoder
    }

    package static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            if let seconds = try? container.decode(Double.self) { return Date(timeIntervalSinceReferenceDate: seconds) }
            let text = try container.decode(String.self)
            guard let date = ServerTimestamp.parse(text) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "must be an RFC 3339 time such as 2026-11-29T10:00:00Z")
            }
            return date
        }
        return decoder
    }

    /// Encodes a wire body to bytes.
    package static func encode<T: Encodable>(_ value: T) throws -> Data {
        try encoder().encode(value)
    }

    /// Decodes a wire body, turning Foundation's decoding errors into a
    /// `WireError` that names the field at fault in plain words.
    package static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
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
