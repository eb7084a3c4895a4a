import Foundation

/// The type of one field of a collection.
public enum FieldType: Sendable, Equatable, Codable {
    /// Text (a JSON string).
    case text
    /// A whole number.
    case integer
    /// Any number, with or without a fraction.
    case number
    /// `true` or `false`.
    case boolean
    /// RFC 3339 text.
    case timestamp
    /// The uuid of a record of another collection.
    case reference(collection: String)
    /// Any JSON value, kept as sent: a list, a nested object (an app's
    /// arrays and nested structs).
    case json
    /// A photo or file: `{"sha256": "<64 hex>", "size": <bytes>, "content_type": "<mime>"}`,
    /// whose bytes are a blob the server must hold completely before the record is accepted.
    case attachment

    enum CodingKeys: String, CodingKey, CaseIterable { case type, collection }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let name = try container.decode(String.self, forKey: .type)
        switch name {
        case "text": self = .text
        case "integer": self = .integer
        case "number": self = .number
        case "boolean": self = .boolean
        case "timestamp": self = .timestamp
        case "json": self = .json
        case "attachment": self = .attachment
        case "reference": self = .reference(collection: try container.decodeNonEmpty(.collection))
        default:
            throw DecodingError.dataCorruptedError(
                forKey: .type, in: container,
                debugDescription: "must be one of text, integer, number, boolean, timestamp, reference, json, attachment (got '\(name)')")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .text: try container.encode("text", forKey: .type)
        case .integer: try container.encode("integer", forKey: .type)
        case .number: try container.encode("number", forKey: .type)
        case .boolean: try container.encode("boolean", forKey: .type)
        case .timestamp: try container.encode("timestamp", forKey: .type)
        case .json: try container.encode("json", forKey: .type)
        case .attachment: try container.encode("attachment", forKey: .type)
        case .reference(let collection):
            try container.encode("reference", forKey: .type)
            try container.encode(collection, forKey: .collection)
        }
    }
}

/// One field of a collection.
public struct FieldSchema: Sendable, Equatable, Codable {
    /// What kind of value the field holds.
    public var type: FieldType
    /// Whether the record must hold a non-null value for the field after every create or update.
    public var required: Bool

    /// A field of this type, optional unless `required` is true.
    public init(_ type: FieldType, required: Bool = false) {
        self.type = type
        self.required = required
    }

    enum CodingKeys: String, CodingKey, CaseIterable { case required }

    /// Every key a field's definition may hold in a configuration.
    package static var configurationKeys: Set<String> {
        Set(CodingKeys.allCases.map(\.rawValue) + FieldType.CodingKeys.allCases.map(\.rawValue))
    }

    public init(from decoder: any Decoder) throws {
        type = try FieldType(from: decoder)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        required = try container.decodeIfPresent(Bool.self, forKey: .required) ?? false
    }

    public func encode(to encoder: any Encoder) throws {
        try type.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(required, forKey: .required)
    }
}

/// What happens when an update or delete arrives with a stale `base_version`.
public enum ConflictPolicy: String, Sendable, Codable {
    /// Nothing is applied; the client gets `conflict` and the current copy.
    case serverWins = "server_wins"
    /// The patch is applied anyway.
    case lastWriteWins = "last_write_wins"
    /// An update is applied when none of the fields it sends changed on the
    /// server since its base version; otherwise nothing is applied and the
    /// client gets `conflict` naming the fields changed on both sides. A
    /// delete with a stale base conflicts, as under `server_wins`.
    case mergeFields = "merge_fields"
}

/// A collection as configured on the server and known to clients.
public struct CollectionSchema: Sendable, Equatable, Codable {
    /// The collection's name: lowercase letters, digits and `_`, starting with a letter, at most 63 characters.
    public var name: String
    /// Each field's name and schema.
    public var fields: [String: FieldSchema]
    /// What happens when an update or delete arrives with a stale base version.
    public var policy: ConflictPolicy
    /// The field a capped download windows on (`created_at`, `visited_at`).
    public var windowField: String?
    /// Readable by every role, writable by none (reference data such as catalogs).
    public var readOnly: Bool

    /// A schema with these fields; by default `server_wins`, with no window field, and writable.
    public init(
        name: String, fields: [String: FieldSchema], policy: ConflictPolicy = .serverWins, windowField: String? = nil,
        readOnly: Bool = false
    ) {
        self.name = name
        self.fields = fields
        self.policy = policy
        self.windowField = windowField
        self.readOnly = readOnly
    }

    enum CodingKeys: String, CodingKey, CaseIterable {
        case name, fields, policy
        case windowField = "window_field"
        case readOnly = "read_only"
    }

    /// The policy's other spelling in a configuration (the one the app's own tables use).
    private enum PolicyAlias: String, CodingKey, CaseIterable { case conflict }

    /// Every key a collection's definition may hold in a configuration.
    package static var configurationKeys: Set<String> {
        Set(CodingKeys.allCases.map(\.rawValue) + PolicyAlias.allCases.map(\.rawValue))
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decodeNonEmpty(.name)
        guard CollectionSchema.isValidName(name) else {
            throw DecodingError.dataCorruptedError(
                forKey: .name, in: container,
                debugDescription: "must start with a lowercase letter and hold only a-z, 0-9 and _ (at most 63)")
        }
        fields = try container.decode([String: FieldSchema].self, forKey: .fields)
        policy =
            try decoder.container(keyedBy: PolicyAlias.self).decodeIfPresent(ConflictPolicy.self, forKey: .conflict)
            ?? container.decodeIfPresent(ConflictPolicy.self, forKey: .policy) ?? .serverWins
        windowField = try container.decodeIfPresent(String.self, forKey: .windowField)
        readOnly = try container.decodeIfPresent(Bool.self, forKey: .readOnly) ?? false
        if let windowField, fields[windowField] == nil {
            throw DecodingError.dataCorruptedError(
                forKey: .windowField, in: container, debugDescription: "names a field the collection does not have")
        }
    }

    /// Field names that reference another collection, with that collection.
    public var references: [String: String] {
        var result: [String: String] = [:]
        for (field, schema) in fields {
            if case .reference(let target) = schema.type { result[field] = target }
        }
        return result
    }

    /// Collection and field names become SQL identifiers and JSON paths, so
    /// they are held to a small alphabet.
    public static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard let first = bytes.first, bytes.count <= 63, (97...122).contains(first) else { return false }
        return bytes.allSatisfy { (97...122).contains($0) || (48...57).contains($0) || $0 == 95 }
    }
}
