import Foundation
#if canImport(SQLite3)
import SQLite3
#else
import CSQLite
#endif

/// SQLite copies bound text and blobs when given this destructor.
let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A prepared statement, owned by its `SQLiteConnection` and cached there.
///
/// Not Sendable: it lives and dies on the connection's serial owner.
public final class SQLiteStatement {
    let handle: OpaquePointer
    let sql: String
    unowned let connection: SQLiteConnection

    init(connection: SQLiteConnection, sql: String) throws {
        var handle: OpaquePointer?
        let code = sqlite3_prepare_v3(connection.handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &handle, nil)
        guard code == SQLITE_OK, let handle else {
            throw connection.error(code: code, sql: sql)
        }
        self.handle = handle
        self.sql = sql
        self.connection = connection
    }

    deinit { sqlite3_finalize(handle) }

    /// Binds values to `?` placeholders, in order.
    func bind(_ values: [SQLiteValue]) throws {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch value {
            case .null: code = sqlite3_bind_null(handle, index)
            case .integer(let number): code = sqlite3_bind_int64(handle, index, number)
            case .real(let number): code = sqlite3_bind_double(handle, index, number)
            case .text(let text): code = Self.bindText(handle, index, text)
            case .blob(let data):
                code = data.withUnsafeBytes { bytes in
                    sqlite3_bind_blob(handle, index, bytes.baseAddress, Int32(bytes.count), sqliteTransient)
                }
            }
            guard code == SQLITE_OK else { throw connection.error(code: code, sql: sql) }
        }
    }

    /// Binds a String (copied by SQLite) from its own UTF-8 storage: passed
    /// as a C string, Swift first copied it into a new NUL-terminated array.
    static func bindText(_ handle: OpaquePointer, _ index: Int32, _ text: String) -> Int32 {
        let bound = text.utf8.withContiguousStorageIfAvailable { bytes in
            // A valid pointer even for an empty string (nil would bind NULL).
            bytes.baseAddress.map {
                sqlite3_bind_text(handle, index, UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self), Int32(bytes.count), sqliteTransient)
            } ?? sqlite3_bind_text(handle, index, "", 0, sqliteTransient)
        }
        return bound ?? sqlite3_bind_text(handle, index, text, -1, sqliteTransient)
    }

    /// Advances one row; false when the statement is done.
    func step() throws -> Bool {
        let code = sqlite3_step(handle)
        switch code {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = connection.error(code: code, sql: sql)
            sqlite3_reset(handle)
            throw error
        }
    }

    func reset() { sqlite3_reset(handle) }
}

/// The current row of a stepping statement. Valid only until the next step.
public struct SQLiteRow {
    let statement: OpaquePointer

    public var columnCount: Int { Int(sqlite3_column_count(statement)) }

    public func isNull(_ index: Int) -> Bool { sqlite3_column_type(statement, Int32(index)) == SQLITE_NULL }

    public func int64(_ index: Int) -> Int64 { sqlite3_column_int64(statement, Int32(index)) }

    public func optionalInt64(_ index: Int) -> Int64? { isNull(index) ? nil : int64(index) }

    public func double(_ index: Int) -> Double { sqlite3_column_double(statement, Int32(index)) }

    public func string(_ index: Int) -> String {
        guard let text = sqlite3_column_text(statement, Int32(index)) else { return "" }
        let count = Int(sqlite3_column_bytes(statement, Int32(index)))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    public func optionalString(_ index: Int) -> String? { isNull(index) ? nil : string(index) }

    /// A column's text in place (nil when NULL), valid until the next step.
    public func bytes(_ index: Int) -> UnsafeBufferPointer<UInt8>? {
        guard let text = sqlite3_column_text(statement, Int32(index)) else { return nil }
        return UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(statement, Int32(index))))
    }

    public func value(_ index: Int) -> SQLiteValue {
        switch sqlite3_column_type(statement, Int32(index)) {
        case SQLITE_INTEGER: return .integer(int64(index))
        case SQLITE_FLOAT: return .real(double(index))
        case SQLITE_TEXT: return .text(string(index))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(statement, Int32(index)))
            guard let bytes = sqlite3_column_blob(statement, Int32(index)) else { return .blob(Data()) }
            return .blob(Data(bytes: bytes, count: count))
        default: return .null
        }
    }
}

/// A cached statement that a hot loop binds and runs itself (a pull page's
/// thousands of upserts): no value array per row, and text is bound from
/// the caller's bytes without being copied into a String first.
public struct SQLitePreparedStatement {
    let statement: SQLiteStatement
    private static let empty: StaticString = ""

    public func bind(_ index: Int32, _ value: Int64) throws {
        try check(sqlite3_bind_int64(statement.handle, index, value))
    }

    public func bindNull(_ index: Int32) throws {
        try check(sqlite3_bind_null(statement.handle, index))
    }

    /// Binds a String (copied by SQLite).
    public func bind(_ index: Int32, _ text: String) throws {
        try check(SQLiteStatement.bindText(statement.handle, index, text))
    }

    /// Binds a blob (copied by SQLite).
    public func bind(_ index: Int32, blob bytes: [UInt8]) throws {
        try check(bytes.withUnsafeBytes { sqlite3_bind_blob(statement.handle, index, $0.baseAddress ?? UnsafeRawPointer(Self.empty.utf8Start), Int32($0.count), sqliteTransient) })
    }

    /// Binds UTF-8 text without copying it: `bytes` must stay valid until `run()` returns.
    public func bind(_ index: Int32, text bytes: UnsafeBufferPointer<UInt8>) throws {
        // A null pointer would bind NULL: empty text points at a static "".
        let start = UnsafeRawPointer(bytes.baseAddress ?? Self.empty.utf8Start)
        try check(sqlite3_bind_text(statement.handle, index, start.assumingMemoryBound(to: CChar.self), Int32(bytes.count), nil))
    }

    /// Steps to the end and resets; returns the number of rows changed.
    @discardableResult
    public func run() throws -> Int {
        defer { statement.reset() }
        while try statement.step() {}
        return Int(sqlite3_changes(statement.connection.handle))
    }

    private func check(_ code: Int32) throws {
        guard code == SQLITE_OK else { throw statement.connection.error(code: code, sql: statement.sql) }
    }
}
