public import Foundation

/// A JSON value as it travels in record payloads and patches.
///
/// Integers and doubles are kept apart so that `section: 3` does not come back
/// as `3.0` after a round trip through the store or the wire.
public enum JSONValue: Sendable, Hashable {
    /// JSON `null`; in a patch it clears the field.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number kept as an integer.
    case int(Int64)
    /// A number kept as a `Double`.
    case double(Double)
    /// A text value.
    case string(String)
    /// A JSON array.
    case array([JSONValue])
    /// A JSON object.
    case object(JSONObject)

    /// The text of a string value, or nil for every other kind.
    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// The integer of an int value (or of a double without a fraction).
    public var intValue: Int64? {
        switch self {
        case .int(let value): return value
        case .double(let value) where value.rounded() == value && abs(value) < 9.0e15: return Int64(value)
        default: return nil
        }
    }

    /// The flag of a bool value, or nil for every other kind.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The fields of an object value, or nil for every other kind.
    public var objectValue: JSONObject? {
        if case .object(let object) = self { return object }
        return nil
    }

    /// Whether the value is JSON `null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// A short name of the value's type, for error messages.
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .int: return "integer"
        case .double: return "number"
        case .string: return "text"
        case .array: return "array"
        case .object: return "object"
        }
    }
}

/// A JSON object: the shape of every record's `data` and of every patch.
public typealias JSONObject = [String: JSONValue]

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode(JSONObject.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

extension JSONValue {
    /// Canonical JSON text (sorted keys), the form records are stored in.
    public func jsonText() throws -> String {
        JSONWriter.text(self)
    }

    /// Parses JSON text into a value.
    public static func parse(_ text: String) throws -> JSONValue {
        try parse(Array(text.utf8))
    }

    public static func parse(_ data: Data) throws -> JSONValue {
        try parse([UInt8](data))
    }

    static func parse(_ bytes: [UInt8]) throws -> JSONValue {
        var scanner = JSONScanner(bytes)
        do {
            let value = try scanner.readValue()
            guard scanner.atEnd() else { throw WireError(path: "", problem: "is not valid JSON") }
            return value
        } catch is JSONScanner.Failure {
            throw WireError(path: "", problem: "is not valid JSON")
        }
    }
}

extension Dictionary where Key == String, Value == JSONValue {
    /// Canonical JSON text of an object (sorted keys).
    package func jsonText() throws -> String { try JSONValue.object(self).jsonText() }

    /// Checks that `text` is one JSON object that `parseObject` would
    /// accept, without building it: for stored payloads that are sent on
    /// as they are.
    package static func checkObject(_ text: String) throws {
        var scanner = JSONScanner(Array(text.utf8))
        do {
            guard try scanner.peek() == UInt8(ascii: "{") else { throw WireError(path: "", problem: "must be a JSON object") }
            _ = try scanner.skipValue(checkingEscapes: true)
            guard scanner.atEnd() else { throw WireError(path: "", problem: "is not valid JSON") }
        } catch is JSONScanner.Failure {
            throw WireError(path: "", problem: "is not valid JSON")
        }
    }

    /// Parses JSON text that must hold an object.
    package static func parseObject(_ text: String) throws -> JSONObject {
        guard case .object(let object) = try JSONValue.parse(text) else {
            throw WireError(path: "", problem: "must be a JSON object")
        }
        return object
    }

    /// Applies a partial patch as push rule 4 of docs/protocol.md describes: each key in
    /// the patch replaces the field; a key set to null clears it.
    package func applyingPatch(_ patch: JSONObject) -> JSONObject {
        var result = self
        for (key, value) in patch {
            if value.isNull { result.removeValue(forKey: key) } else { result[key] = value }
        }
        return result
    }

    /// The patch that turns `old` into `self`: changed and new keys with their
    /// values, removed keys as null.
    package func patch(from old: JSONObject) -> JSONObject {
        var patch: JSONObject = [:]
        for (key, value) in self where old[key] != value { patch[key] = value }
        for key in old.keys where self[key] == nil { patch[key] = .null }
        return patch
    }
}
