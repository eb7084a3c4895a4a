import Foundation
import OutpostCore

/// The console's answers are built as JSON values: each is read by the
/// console's own script, and shapes are documented in docs/openapi.yaml.
extension JSONValue {
    /// Text, or `null` when absent.
    static func text(_ value: String?) -> JSONValue { value.map { .string($0) } ?? .null }

    /// A whole number, or `null` when absent.
    static func number(_ value: Int64?) -> JSONValue { value.map { .int($0) } ?? .null }

    /// Stored JSON text as a value (a record's data), `null` when absent or unreadable.
    static func stored(_ text: String?) -> JSONValue {
        guard let text, let value = try? JSONValue.parse(text) else { return .null }
        return value
    }
}

extension SyncServer {
    /// A console answer: JSON, one person's data, never cached.
    static func consoleJSON(_ value: JSONValue, user: String?) throws -> HTTPResponse {
        .json(200, Array(try WireCoding.encode(value)), user: user)
    }
}
