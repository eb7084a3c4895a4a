import Foundation
package import OutpostSQLite

/// Replaces a table's definition while keeping its rows: SQLite cannot
/// change a constraint in place, so the old table is renamed aside, the
/// new one made from its current definition, the rows copied, the old one
/// dropped (its indexes with it) and the indexes made again. Runs inside
/// the caller's transaction, so a failure leaves the old table as it was.
package enum TableRebuild {
    /// Whether the stored definition of `table` holds `text` (a legacy
    /// constraint's exact form).
    package static func definition(of table: String, contains text: String, in connection: SQLiteConnection) throws -> Bool {
        let sql = try connection.first(
            "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?", [.text(table)], { $0.string(0) })
        return sql?.contains(text) ?? false
    }

    /// `create`: the table's current `CREATE TABLE`; `indexes`: its current
    /// indexes. Every column both definitions share is copied, keys included
    /// (the outbox's `entry` is its rowid), so no row changes its key.
    package static func rebuild(_ table: String, create: String, indexes: [String], in connection: SQLiteConnection) throws {
        let aside = "\(table)__legacy"
        let oldColumns = try columns(of: table, in: connection)
        try connection.execute("ALTER TABLE \"\(table)\" RENAME TO \"\(aside)\"")
        try connection.execute(create)
        let shared = try columns(of: table, in: connection).filter(oldColumns.contains)
            .map { "\"\($0)\"" }.joined(separator: ", ")
        try connection.execute("INSERT INTO \"\(table)\" (\(shared)) SELECT \(shared) FROM \"\(aside)\"")
        try connection.execute("DROP TABLE \"\(aside)\"")
        for index in indexes { try connection.execute(index) }
    }

    package static func columns(of table: String, in connection: SQLiteConnection) throws -> [String] {
        try connection.query("PRAGMA table_info(\"\(table)\")") { $0.string(1) }
    }
}
