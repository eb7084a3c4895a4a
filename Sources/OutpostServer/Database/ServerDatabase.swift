import Foundation
import CLibPQ
import OutpostSQLite

/// Which SQL the server's database speaks. The sync logic is written once in
/// the subset both understand (`?` placeholders, `ON CONFLICT … DO UPDATE`,
/// `RETURNING`, `CAST(? AS BIGINT)` where a type must be stated); DDL and a
/// few expressions differ by dialect.
public enum SQLDialect: Sendable {
    case sqlite
    case postgres
}

/// A value bound to, or read from, a server SQL statement.
public enum SQLValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    /// Bytes: on SQLite a BLOB; on PostgreSQL a `bytea` in its hex form.
    case blob([UInt8])

    public static func text(_ value: String?) -> SQLValue { value.map { .text($0) } ?? .null }
    public static func integer(_ value: Int64?) -> SQLValue { value.map { .integer($0) } ?? .null }
    public static func bool(_ value: Bool) -> SQLValue { .integer(value ? 1 : 0) }
}

/// One result row. PostgreSQL hands back text, SQLite typed values; the
/// accessors accept both.
public struct SQLRow: Sendable, Equatable {
    public var values: [SQLValue]

    public init(_ values: [SQLValue]) { self.values = values }

    public func isNull(_ index: Int) -> Bool { values[index] == .null }

    public func int(_ index: Int) -> Int64 { optionalInt(index) ?? 0 }

    public func optionalInt(_ index: Int) -> Int64? {
        switch values[index] {
        case .integer(let value): return value
        case .real(let value): return Int64(value)
        case .text(let text): return Int64(text)
        case .blob(let bytes): return Int64(String(decoding: bytes, as: UTF8.self))
        case .null: return nil
        }
    }

    public func string(_ index: Int) -> String { optionalString(index) ?? "" }

    public func optionalString(_ index: Int) -> String? {
        switch values[index] {
        case .text(let text): return text
        case .integer(let value): return String(value)
        case .real(let value): return String(value)
        case .blob(let bytes): return String(decoding: bytes, as: UTF8.self)
        case .null: return nil
        }
    }

    public func bool(_ index: Int) -> Bool {
        switch values[index] {
        case .text(let text): return text == "1" || text == "t" || text == "true"
        default: return int(index) != 0
        }
    }
}

/// Runs statements inside one transaction of a `ServerDatabase`.
/// Valid only inside the closure it is passed to.
public protocol SQLExecutor {
    var dialect: SQLDialect { get }
    /// Runs a statement; returns the number of rows it changed.
    @discardableResult
    func execute(_ sql: String, _ arguments: [SQLValue]) throws -> Int
    /// Runs a query and hands each row to `body` as the database's own
    /// bytes, without making values: the hot path of pull writes its answer
    /// straight from them. A row is valid only during its call. (`query`
    /// copies rows out of it.)
    func scan(_ sql: String, _ arguments: [SQLValue], _ body: (SQLRawRow) throws -> Void) throws
    /// Runs an `INSERT` of one row into a table keyed by `id` and returns
    /// that id. Not by `RETURNING` on SQLite: it gives the statement a
    /// savepoint of its own, and at every savepoint FTS5 writes the words it
    /// holds to disk (see `SearchIndex`).
    func insertReturningID(_ sql: String, _ arguments: [SQLValue]) throws -> Int64
}

/// A result row read in place (see `SQLExecutor.scan`).
public struct SQLRawRow {
    enum Source {
        case sqlite(SQLiteRow)
        /// A libpq result and a row number: every value is text.
        case postgres(result: OpaquePointer, row: Int32)
    }

    let source: Source

    /// Every column as a value kept after the row is gone: SQLite's typed
    /// values (a blob's accessors read it as text), PostgreSQL's text.
    public var values: [SQLValue] {
        switch source {
        case .sqlite(let row):
            return (0..<row.columnCount).map { index in
                switch row.value(index) {
                case .null: return .null
                case .integer(let value): return .integer(value)
                case .real(let value): return .real(value)
                case .text(let text): return .text(text)
                case .blob(let data): return .blob([UInt8](data))
                }
            }
        case .postgres(let result, _):
            return (0..<Int(PQnfields(result))).map { column in
                text(column).map { .text(String(decoding: $0, as: UTF8.self)) } ?? .null
            }
        }
    }

    /// A column's text as UTF-8 bytes; nil when NULL.
    public func text(_ column: Int) -> UnsafeBufferPointer<UInt8>? {
        switch source {
        case .sqlite(let row): return row.bytes(column)
        case .postgres(let result, let row): return PostgresExecutor.bytes(result, row, Int32(column))
        }
    }

    public func int(_ column: Int) -> Int64 {
        switch source {
        case .sqlite(let row): return row.int64(column)
        case .postgres:
            guard let text = text(column) else { return 0 }
            return Int64(String(decoding: text, as: UTF8.self)) ?? 0
        }
    }

    public func bool(_ column: Int) -> Bool {
        switch source {
        case .sqlite(let row): return row.int64(column) != 0
        case .postgres:
            guard let first = text(column)?.first else { return false }
            return first == UInt8(ascii: "1") || first == UInt8(ascii: "t")
        }
    }
}

extension SQLExecutor {
    /// Appended to a SELECT of rows the transaction will change: PostgreSQL
    /// locks them until COMMIT (its writers run in parallel); SQLite has one
    /// writer at a time and no such clause.
    var forUpdate: String { dialect == .postgres ? " FOR UPDATE" : "" }

    /// Runs a query and returns every row.
    public func query(_ sql: String, _ arguments: [SQLValue]) throws -> [SQLRow] {
        var rows: [SQLRow] = []
        try scan(sql, arguments) { rows.append(SQLRow($0.values)) }
        return rows
    }

    public func first(_ sql: String, _ arguments: [SQLValue] = []) throws -> SQLRow? {
        try query(sql, arguments).first
    }
}

/// The server's storage: SQLite (embedded default) or PostgreSQL.
///
/// On SQLite, `write` transactions are serialised (its write lock), so feed
/// versions from its counter become visible in the order they were given.
/// On PostgreSQL writes run in parallel, kept apart by row locks; the feed
/// stays gap-free because readers stop at its watermark (`FeedVersions`,
/// `FeedWatermark`).
public protocol ServerDatabase: AnyObject, Sendable {
    var dialect: SQLDialect { get }
    /// A read-write transaction; committed when `body` returns, rolled back when it throws.
    @discardableResult
    func write<T>(_ body: (any SQLExecutor) throws -> T) throws -> T
    /// A read-only transaction over one consistent snapshot.
    func read<T>(_ body: (any SQLExecutor) throws -> T) throws -> T
    /// Closes every connection.
    func close()
    /// Announces a commit to every server process sharing the database;
    /// run inside the write transaction, so it is heard only if it commits.
    func announce(_ payload: String, in sql: any SQLExecutor) throws
    /// Calls `onPayload` with every commit announced by any process; nil
    /// where there is only this process (SQLite).
    func listenForCommits(
        log: @escaping @Sendable (String) -> Void, _ onPayload: @escaping @Sendable (String) -> Void
    ) -> (any CommitListening)?
    /// Time spent waiting before transactions could run, and retries, since
    /// opening (for `/metrics`); nil where nothing is counted.
    var waits: DatabaseWaits? { get }
}

extension ServerDatabase {
    public var waits: DatabaseWaits? { nil }

    /// One process per database: its commits are known in process.
    public func announce(_ payload: String, in sql: any SQLExecutor) throws {}

    public func listenForCommits(
        log: @escaping @Sendable (String) -> Void, _ onPayload: @escaping @Sendable (String) -> Void
    ) -> (any CommitListening)? { nil }
}

/// A storage failure, sorted into "not now" and "no".
public struct DatabaseError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable {
        /// Busy, locked, connection lost, serialization failure: try again later (503).
        case transient
        /// A constraint was violated.
        case constraint
        /// Anything else: a bug or a broken database.
        case failure
    }

    public var kind: Kind
    public var message: String
    public var sql: String?
    /// PostgreSQL's SQLSTATE code, when it said one.
    public var sqlState: String?
    /// What PostgreSQL said about the failure beyond its code: its primary
    /// message, and the column and constraint it names (an app table's
    /// refusal is shown to the device in these words).
    package var detail = Detail()

    package struct Detail: Sendable, Equatable {
        package var primary: String?
        package var column: String?
        package var constraint: String?
    }

    public init(kind: Kind, message: String, sql: String? = nil, sqlState: String? = nil) {
        self.kind = kind
        self.message = message
        self.sql = sql
        self.sqlState = sqlState
    }

    public var description: String {
        var text = "database error (\(kind)): \(message)"
        if let sql { text += " [\(sql.prefix(200))]" }
        return text
    }

    /// For the server's log: the message's first line and the statement
    /// (placeholders, never argument values). PostgreSQL's DETAIL lines can
    /// quote row values, which are request data.
    var logDescription: String {
        let head = message.split(whereSeparator: \.isNewline).first.map(String.init) ?? message
        let state = message.range(of: "(SQLSTATE ").map { " " + message[$0.lowerBound...] } ?? ""
        var text = "database error (\(kind)): \(head)\(head.hasSuffix(state) ? "" : state)"
        if let sql { text += " [\(sql.prefix(200))]" }
        return text
    }
}
