public import Foundation
public import OutpostCore

/// A collection the local store keeps: its name, which fields point at other
/// collections (parents), and which fields get a local index.
public struct CollectionDescriptor: Sendable, Equatable {
    /// The collection's name, as the server knows it.
    public var name: String
    /// Field name → collection it references, e.g. `["person": "people"]`.
    /// A child is sent only after its parent's create.
    public var references: [String: String]
    /// Fields queried often enough to deserve an index on the device.
    public var indexedFields: [String]
    /// How long the device keeps a synced record the server has not changed
    /// since; nil keeps everything. Older copies
    /// are removed from the device, never from the server, and never while
    /// the record has local changes waiting. Reckoned on the server's clock.
    public var retention: TimeInterval?

    /// A descriptor for the collection `name`; by default it has no references and no local indexes, and keeps every synced copy.
    public init(
        name: String, references: [String: String] = [:], indexedFields: [String] = [], retention: TimeInterval? = nil
    ) {
        self.name = name
        self.references = references
        self.indexedFields = indexedFields
        self.retention = retention
    }

    /// A descriptor taken from the server's collection schema.
    public init(schema: CollectionSchema, indexedFields: [String] = []) {
        self.init(name: schema.name, references: schema.references, indexedFields: indexedFields)
    }
}

/// A Codable record type the app works with: the fields of one collection.
///
/// The record's identity (`uuid`) and sync state live beside it in
/// ``LocalRecord``, so the type holds only what a person edits:
///
/// ```swift
/// struct Visit: SyncRecord {
///     static let collection = "visits"
///     static let references = ["person": "people"]
///     var person: RecordLink<Person>
///     var visitedAt: Date          // the field "visited_at"
///     var notes: String?
/// }
/// ```
///
/// Property names become field names in snake case (`visitedAt` is
/// `visited_at`; see ``fieldNaming``); a `CodingKeys` raw value already in
/// snake case is kept as written. Dates are RFC 3339 text kept to the
/// microsecond, UUIDs lowercase text, `Decimal` a JSON number, `Data` base64,
/// `URL` its absolute string, enums their raw value; nil optionals are left
/// out, so an update never clears a field the type does not set.
public protocol SyncRecord: Codable, Sendable {
    /// The collection's name on the server.
    static var collection: String { get }
    /// Field name → referenced collection (parents that must be sent first).
    static var references: [String: String] { get }
    /// Fields to index locally.
    static var indexedFields: [String] { get }
    /// How long synced copies are kept on the device (nil: always).
    static var retention: TimeInterval? { get }
    /// How property names become field names (default: snake case).
    static var fieldNaming: FieldNaming { get }
}

extension SyncRecord {
    /// By default, no references.
    public static var references: [String: String] { [:] }
    /// By default, no local indexes.
    public static var indexedFields: [String] { [] }
    /// By default, synced copies are kept for good.
    public static var retention: TimeInterval? { nil }
    /// By default, property names become snake-case field names.
    public static var fieldNaming: FieldNaming { .snakeCase }

    /// The descriptor the store registers for this type.
    public static var descriptor: CollectionDescriptor {
        CollectionDescriptor(name: collection, references: references, indexedFields: indexedFields, retention: retention)
    }
}

/// Converts between record types and the JSON objects the store keeps.
enum RecordCoding {
    /// A typed record's fields, encoded straight into JSON values (no text
    /// in between: see `JSONValueCoding`).
    static func object<T: SyncRecord>(from value: T) throws -> JSONObject {
        let encoded: JSONValue
        do {
            encoded = try JSONValueCoding.encode(value, fieldNames: T.fieldNaming)
        } catch let error as EncodingError {
            throw StoreError.invalidRecord("\(T.self) cannot be stored: \(error)")
        }
        guard case .object(let object) = encoded else {
            throw StoreError.invalidRecord("\(T.self) does not encode to a JSON object")
        }
        return object
    }

    static func value<T: SyncRecord>(_ type: T.Type, from object: JSONObject) throws -> T {
        do {
            return try JSONValueCoding.decode(type, from: .object(object), fieldNames: T.fieldNaming)
        } catch let error as WireError {
            throw StoreError.invalidRecord("stored data does not decode as \(T.self): \(error)")
        }
    }
}

/// A typed reference to a record of another collection: on the wire the
/// record's uuid as text, which the server checks points at a record the
/// person can see. List the field in the record type's `references`.
public struct RecordLink<Target: SyncRecord>: Codable, Hashable, Sendable, CustomStringConvertible {
    /// The uuid of the linked record.
    public var uuid: UUID

    /// A link to the record with this uuid.
    public init(_ uuid: UUID) { self.uuid = uuid }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let uuid = UUID(uuidString: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "must be the uuid of a \(Target.collection) record")
        }
        self.uuid = uuid
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(uuid.wireText)
    }

    public var description: String { uuid.wireText }
}
