import Foundation
import OutpostCore

/// The server's own log lines (start, reload, stop, a lost database
/// listener, JWKS refreshes): one JSON object a line on stderr, like the
/// request log, so a log shipper parses every line the same way.
public enum ServerLog {
    /// How much a line matters to an operator.
    public enum Level: String, Sendable, Encodable {
        case info, warning, error
    }

    /// One line: when, how much it matters, what happened, and fields that
    /// say more (a version, a port).
    package struct Line: Encodable {
        var time = ServerTimestamp(Date()).rawValue
        var level: Level
        var message: String
        var fields: [String: String] = [:]

        private enum CodingKeys: String, CodingKey { case time, level, message }
        private struct FieldKey: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        package func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(time, forKey: .time)
            try container.encode(level, forKey: .level)
            try container.encode(message, forKey: .message)
            var extra = encoder.container(keyedBy: FieldKey.self)
            for (key, value) in fields.sorted(by: { $0.key < $1.key }) {
                try extra.encode(value, forKey: FieldKey(stringValue: key))
            }
        }

        package var text: String { String(decoding: (try? WireCoding.encode(self)) ?? Data(), as: UTF8.self) }
    }

    /// Writes one line on stderr.
    public static func write(_ level: Level, _ message: String, _ fields: [String: String] = [:]) {
        FileHandle.standardError.write(Data((Line(level: level, message: message, fields: fields).text + "\n").utf8))
    }

    /// An informational line.
    public static func info(_ message: String, _ fields: [String: String] = [:]) { write(.info, message, fields) }
    /// Something an operator should look at; the server goes on.
    public static func warning(_ message: String, _ fields: [String: String] = [:]) { write(.warning, message, fields) }
}
