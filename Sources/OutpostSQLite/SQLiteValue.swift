public import Foundation

/// A value bound to or read from a SQLite statement.
public enum SQLiteValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)
}

extension SQLiteValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByNilLiteral {
    public init(stringLiteral value: String) { self = .text(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(nilLiteral: ()) { self = .null }
}

extension SQLiteValue {
    /// Text, or NULL when the optional is empty.
    public static func text(_ value: String?) -> SQLiteValue { value.map { .text($0) } ?? .null }
    /// An integer, or NULL when the optional is empty.
    public static func integer(_ value: Int64?) -> SQLiteValue { value.map { .integer($0) } ?? .null }
}
