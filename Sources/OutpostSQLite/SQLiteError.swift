/// A failed SQLite call: the result code, SQLite's message, and the SQL that ran.
///
/// Callers can `switch` on the code with the constants below:
/// `catch let error as SQLiteError where error.code == .constraint`.
public struct SQLiteError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A primary SQLite result code (the low byte of an extended code).
    public struct Code: RawRepresentable, Sendable, Hashable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue & 0xFF }

        /// `SQLITE_ERROR`: a generic error, such as bad SQL or a missing table.
        public static let error = Code(rawValue: 1)
        /// `SQLITE_BUSY`: another connection holds the database; try again later.
        public static let busy = Code(rawValue: 5)
        /// `SQLITE_LOCKED`: a table is locked by another statement on the same connection.
        public static let locked = Code(rawValue: 6)
        /// `SQLITE_READONLY`: the database cannot be written.
        public static let readOnly = Code(rawValue: 8)
        /// `SQLITE_IOERR`: the operating system reported an I/O error.
        public static let ioError = Code(rawValue: 10)
        /// `SQLITE_CORRUPT`: the database file is damaged.
        public static let corrupt = Code(rawValue: 11)
        /// `SQLITE_FULL`: the disk is full.
        public static let full = Code(rawValue: 13)
        /// `SQLITE_CANTOPEN`: the database file could not be opened.
        public static let cantOpen = Code(rawValue: 14)
        /// `SQLITE_CONSTRAINT`: a constraint, such as a unique key, was violated.
        public static let constraint = Code(rawValue: 19)
        /// `SQLITE_MISUSE`: the SQLite API was called incorrectly (a bug).
        public static let misuse = Code(rawValue: 21)
        /// `SQLITE_NOTADB`: the file is not a SQLite database.
        public static let notADatabase = Code(rawValue: 26)
        /// `SQLITE_PERM`: the operating system denied access.
        public static let permission = Code(rawValue: 3)
    }

    /// The primary result code; compare it with the `Code` constants.
    public var code: Code
    /// The full extended result code, for logs.
    public var extendedCode: Int32
    /// SQLite's own description of the error.
    public var message: String
    /// The statement that failed, if one was running.
    public var sql: String?

    /// An error from an extended result code, SQLite's message and the SQL that ran.
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
