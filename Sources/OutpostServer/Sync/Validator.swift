import Foundation
import OutpostCore

/// Checks record data against its collection's schema (docs/protocol.md, push rule 6):
/// known fields, types, required fields, and references to records the
/// caller can see. Returns each field's problem; empty when valid.
struct Validator {
    let schema: CollectionSchema
    /// Whether a live record of `collection` with `uuid` exists in the caller's scope.
    let referenceExists: (_ collection: String, _ uuid: String) throws -> Bool

    /// Longest text accepted in one field.
    static let maxTextLength = 65_536

    /// `changed` are the fields set by this mutation (all of them for a
    /// create, the patch's keys for an update); `merged` is the record after it.
    func problems(changed: JSONObject, merged: JSONObject) throws -> [String: String] {
        var problems: [String: String] = [:]
        for (field, value) in changed {
            guard let fieldSchema = schema.fields[field] else {
                problems[field] = "is not a field of \(schema.name)"
                continue
            }
            if value.isNull { continue }
            if let problem = try check(value, against: fieldSchema.type) { problems[field] = problem }
        }
        for (field, fieldSchema) in schema.fields where fieldSchema.required {
            if merged[field] == nil || merged[field]?.isNull == true, problems[field] == nil {
                problems[field] = "is required"
            }
        }
        return problems
    }

    private func check(_ value: JSONValue, against type: FieldType) throws -> String? {
        switch type {
        case .text:
            guard let text = value.stringValue else { return "must be text" }
            return text.utf8.count > Self.maxTextLength ? "is longer than \(Self.maxTextLength) bytes" : nil
        case .integer:
            if case .int = value { return nil }
            return "must be a whole number"
        case .number:
            switch value {
            case .int, .double: return nil
            default: return "must be a number"
            }
        case .boolean:
            return value.boolValue == nil ? "must be true or false" : nil
        case .timestamp:
            guard let text = value.stringValue, ServerTimestamp(rawValue: text).date != nil else {
                return "must be an RFC 3339 time such as 2026-11-29T10:00:00Z"
            }
            return nil
        case .json:
            // Depth and size are bounded for every body already.
            return nil
        case .attachment:
            return AttachedFile(value) == nil
                ? #"must be {"sha256": 64 hexadecimal digits, "size": bytes, "content_type": text}"# : nil
        case .reference(let collection):
            guard let text = value.stringValue, let uuid = UUID.fromWire(text) else {
                return "must be the uuid of a record in \(collection)"
            }
            return try referenceExists(collection, uuid.wireText) ? nil : "refers to a \(collection) record that does not exist"
        }
    }
}

extension AttachedFile {
    /// The attachments a record's data names, by field.
    /// Only the collection's attachment fields count: a JSON field may hold anything.
    static func all(in data: JSONObject?, schema: CollectionSchema) -> [String: AttachedFile] {
        guard let data else { return [:] }
        var found: [String: AttachedFile] = [:]
        for (field, fieldSchema) in schema.fields where fieldSchema.type == .attachment {
            if let value = data[field], let attachment = AttachedFile(value) { found[field] = attachment }
        }
        return found
    }
}
