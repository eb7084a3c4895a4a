import Foundation

/// A wire body that does not match the protocol: which field, and what is wrong
/// with it, in words a developer can act on.
public struct WireError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Dotted path of the field at fault (`mutations[2].op`), empty for the whole body.
    public var path: String
    /// What is wrong, as the end of a sentence ("is missing", "must be a UUID").
    public var problem: String

    /// An error for the field at `path` (empty for the whole body), with `problem` ending the sentence.
    public init(path: String, problem: String) {
        self.path = path
        self.problem = problem
    }

    public var description: String {
        path.isEmpty ? "The body \(problem)." : "Field '\(path)' \(problem)."
    }

    init(_ error: DecodingError) {
        func render(_ codingPath: [any CodingKey]) -> String {
            var text = ""
            for key in codingPath {
                if let index = key.intValue {
                    text += "[\(index)]"
                } else {
                    text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
                }
            }
            return text
        }
        switch error {
        case .keyNotFound(let key, let context):
            self.init(path: render(context.codingPath + [key]), problem: "is missing")
        case .valueNotFound(_, let context):
            self.init(path: render(context.codingPath), problem: "must not be null")
        case .typeMismatch(let type, let context):
            self.init(path: render(context.codingPath), problem: "must be \(Self.describe(type))")
        case .dataCorrupted(let context):
            if let underlying = context.underlyingError as? WireError {
                self = underlying
            } else if context.codingPath.isEmpty {
                self.init(path: "", problem: "is not valid JSON")
            } else {
                self.init(path: render(context.codingPath), problem: context.debugDescription)
            }
        @unknown default:
            self.init(path: "", problem: "could not be read")
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "text"
        case is Bool.Type: return "true or false"
        case is Int64.Type, is Int.Type: return "an integer"
        case is Double.Type: return "a number"
        default:
            let name = String(describing: type)
            if name.hasPrefix("Array") { return "an array" }
            if name.hasPrefix("Dictionary") { return "an object" }
            return "a \(name)"
        }
    }
}
