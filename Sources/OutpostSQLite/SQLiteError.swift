/// A failed SQLite call: the result code, SQLite's message, and the SQL that ran.
///
/// Callers can `switch` on the code with the constants below:
/// `catch let error as SQLiteError where error.code == .constraint`.
public struct SQLiteError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A primary SQLite result code (the low byte of an extended code).
    public struct Code: RawRepresentable, Sendable, Hashable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue & 0xFF }

        public static let error = Code(rawValue: 1)
        public static let busy = Code(rawValue: 5)
        public static let locked = Code(rawValue: 6)
        public static let readOnly = Code(rawValue: 8)
        public static let ioError = Code(rawValue: 10)
        public static let corrupt = Code(rawValue: 11)
        public static let full = Code(rawValue: 13)
        public static let cantOpen = Code(rawValue: 14)
        public static let constraint = Code(rawValue: 19)
        public static let misuse = Code(rawValue: 21)
        public static let notADatabase = Code(rawValue: 26)
        public static let permission = Code(rawValue: 3)
    }

    public var code: Code
    /// The full extended result code, for logs.
    public var extendedCode: Int32
    public var message: String
    /// The statement that failed, if one was running.
    public var sql: String?

    public init(extendedCode: Int32, message: String, sql: String? = nil) {
        self.code = Code(rawValue: extendedCode)
        self.extendedCode = extendedCode
        self.message = message
        self.sql = sql
    }

    public var description: String {
        var text = "SQLite error \(extendedCode): \(message)"
        if let sql { text += " (while running: \(sql))" }
        return text
    }
}

/// Lets `catch` clauses and switches match an error against a code:
/// `catch SQLiteError.Code.busy`.
public func ~= (pattern: SQLiteError.Code, error: any Error) -> Bool {
    (error as? SQLiteError)?.code == pattern
}
