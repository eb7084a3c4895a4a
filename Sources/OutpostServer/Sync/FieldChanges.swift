import Foundation
import OutpostCore

/// Which fields of a record changed on the server since a version, read from
/// the record's history: what the `merge_fields` policy compares a stale
/// update's fields with.
enum FieldChanges {
    /// The fields whose value differs between some version after `base` and
    /// the one before it, up to `record` as it stands (a field changed and
    /// changed back counts: someone wrote it). Nil when the history no longer
    /// holds the copy at `base`, so nothing can be said.
    static func since(_ base: Int64, of record: ServerRecord, in sql: any SQLExecutor) throws -> Set<String>? {
        let rows = try sql.query(
            """
            SELECT version, data FROM record_history
            WHERE collection = ? AND uuid = ? AND version >= ? ORDER BY version
            """, [.text(record.collection), .text(record.uuid), .integer(base)])
        guard let first = rows.first, first.int(0) == base,
            let baseText = RecordHistory.data(stored: first.optionalString(1), version: base, of: record)
        else { return nil }
        var changed = Set<String>()
        var before = try JSONObject.parseObject(baseText)
        for row in rows.dropFirst() {
            let version = row.int(0)
            // A tombstone's copy is nil: every field counts as changed.
            let after = try RecordHistory.data(stored: row.optionalString(1), version: version, of: record)
                .map { try JSONObject.parseObject($0) } ?? [:]
            for key in Set(before.keys).union(after.keys) where before[key] != after[key] {
                changed.insert(key)
            }
            before = after
        }
        return changed
    }
}
