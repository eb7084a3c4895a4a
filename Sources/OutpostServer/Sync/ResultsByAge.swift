import Foundation

/// Removes push results older than a time without an index on their age.
///
/// Results are inserted in time order, so on SQLite their rowids grow
/// with their `created_at`: the newest old one is found by bisection over
/// rowids (a lookup of the table's own b-tree per step), and the rows up to
/// it are deleted as one range. The time is checked again on each row, so a
/// row stamped later (a clock stepped back) is never removed early; one
/// stamped earlier past the boundary waits for a later run. On PostgreSQL a
/// block range index on `created_at` serves the same question.
enum ResultsByAge {
    static func delete(olderThan cutoff: String, in sql: any SQLExecutor) throws {
        guard sql.dialect == .sqlite else {
            try sql.execute("DELETE FROM mutation_results WHERE created_at < ?", [.text(cutoff)])
            return
        }
        guard let through = try lastRowID(olderThan: cutoff, in: sql) else { return }
        try sql.execute("DELETE FROM mutation_results WHERE rowid <= ? AND created_at < ?", [.integer(through), .text(cutoff)])
    }

    /// The highest rowid whose row is older than `cutoff`, rows being in
    /// time order; nil when the oldest row is not.
    static func lastRowID(olderThan cutoff: String, in sql: any SQLExecutor) throws -> Int64? {
        let next = "SELECT rowid, created_at FROM mutation_results WHERE rowid >= ? ORDER BY rowid LIMIT 1"
        guard let first = try sql.first(next, [.integer(Int64.min)]), first.string(1) < cutoff else { return nil }
        var low = first.int(0)
        var high = try sql.first("SELECT MAX(rowid) FROM mutation_results")?.int(0) ?? low
        // The row at `low` is old; no row past `high` is.
        while low < high {
            let middle = low + (high - low + 1) / 2
            guard let row = try sql.first(next, [.integer(middle)]) else {
                high = middle - 1
                continue
            }
            if row.string(1) < cutoff { low = row.int(0) } else { high = middle - 1 }
        }
        return low
    }
}
