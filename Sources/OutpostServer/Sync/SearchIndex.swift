import Foundation

/// Keeps SQLite's search index (`records_search`, FTS5) in step with the
/// records' data. PostgreSQL's index is an expression index over the same
/// column, which the database keeps itself: there every call does nothing.
///
/// The statements that write a record's data write its words here, in the
/// same transaction; no trigger does. A trigger made each record's `INSERT`
/// and `UPDATE` a statement with a savepoint of its own (it writes two
/// tables and may fail halfway), and FTS5 writes the words it holds in
/// memory to disk at every savepoint: one new index segment per record,
/// merged again and again as the push went on. Written by plain statements,
/// a transaction's words reach the disk once, at its commit. Measured on
/// 10,000 creates in pushes of 500: 0.20-0.25 s of index work by trigger,
/// 0.08 s this way.
///
/// The index reads its content from `records` (FTS5's external content), so
/// removing words needs the exact text they were indexed from: the callers
/// pass the row's data as it stood. A `DELETE FROM records` still removes
/// the row's words by trigger (housekeeping's purge, which is rare and
/// removes tombstones, whose words are gone already).
package enum SearchIndex {
    /// A new record's words, from its stored data text (nil: a tombstone,
    /// nothing to index).
    package static func add(id: Int64, data: String?, in sql: any SQLExecutor) throws {
        guard sql.dialect == .sqlite, let data else { return }
        try sql.execute("INSERT INTO records_search (rowid, data) VALUES (?, ?)", [.integer(id), .text(data)])
    }

    /// A record whose data went from `old` to `new` (either nil for a tombstone).
    package static func replace(id: Int64, old: String?, new: String?, in sql: any SQLExecutor) throws {
        guard sql.dialect == .sqlite, old != new else { return }
        if let old {
            try sql.execute(
                "INSERT INTO records_search (records_search, rowid, data) VALUES ('delete', ?, ?)", [.integer(id), .text(old)])
        }
        try add(id: id, data: new, in: sql)
    }

    /// Every record written at `versions` (a transaction's
    /// `FeedVersions.issued`) by inserts of many rows in one statement
    /// (seeding), in one statement of its own.
    package static func addRecords(at versions: ClosedRange<Int64>, in sql: any SQLExecutor) throws {
        guard sql.dialect == .sqlite else { return }
        try sql.execute(
            """
            INSERT INTO records_search (rowid, data)
            SELECT id, data FROM records WHERE version BETWEEN ? AND ? AND data IS NOT NULL
            """, [.integer(versions.lowerBound), .integer(versions.upperBound)])
    }
}
