package import Foundation
import OutpostCore

/// How `mutation_results` holds a result's client id and mutation id.
///
/// Both are UUIDs. As 36 characters of text they were most of the table's
/// bytes: in the row, again in its primary key and in the index on mutation
/// ids. On SQLite, once the contract step that converts the stored ones has
/// run (`ServerSchema.compactResultIDsStep`), they are kept as their 16
/// bytes; before it (an older server may still read them) and on
/// PostgreSQL, as text. Either way a stored id reads back as its wire text.
package struct ResultIDs: Sendable, Equatable {
    /// Whether ids are bound and stored as their 16 bytes.
    package let asBytes: Bool

    package init(asBytes: Bool) { self.asBytes = asBytes }

    /// The form a database of `dialect` uses once its contract steps reached `oldestServer`.
    package init(dialect: SQLDialect, oldestServer: Int) {
        asBytes = dialect == .sqlite && oldestServer >= ServerSchema.compactResultIDsStep
    }

    /// The form the database `sql` works on uses now (one read of the schema's mark).
    package static func current(_ sql: any SQLExecutor) throws -> ResultIDs {
        ResultIDs(dialect: sql.dialect, oldestServer: try SchemaState.oldestServer(sql))
    }

    /// An id as a statement binds it.
    package func value(_ id: UUID) -> SQLValue {
        asBytes ? .blob(Self.bytes(id)) : .text(id.wireText)
    }

    /// An id known by its wire text (the push's client id). Text that is
    /// no UUID's wire text stays text, as the conversion left such rows.
    package func value(_ text: String) -> SQLValue {
        guard asBytes, let id = UUID.fromWire(text), id.wireText == text else { return .text(text) }
        return .blob(Self.bytes(id))
    }

    /// A stored id as its wire text, whichever form it is in.
    package static func text(_ value: SQLValue) -> String {
        guard case .blob(let bytes) = value, bytes.count == 16 else { return SQLRow([value]).string(0) }
        return bytes.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }.wireText
    }

    static func bytes(_ id: UUID) -> [UInt8] { withUnsafeBytes(of: id.uuid) { [UInt8]($0) } }

    /// The contract step's copy (SQLite), after its statements renamed the
    /// table of text ids to `mutation_results_text` and made the new one:
    /// every row moves, in rowid order and under its own rowid (housekeeping
    /// finds old results by rowid), with each id that is a UUID's wire text
    /// as its bytes. Anything else stays as it was: no lookup ever matched it.
    static func convertStoredResults(in sql: any SQLExecutor) throws {
        let bytes = ResultIDs(asBytes: true)
        var after = Int64.min
        while true {
            let rows = try sql.query(
                """
                SELECT rowid, user_id, client_id, seq, mutation_id, result, created_at, record_version
                FROM mutation_results_text WHERE rowid > ? ORDER BY rowid LIMIT 1000
                """, [.integer(after)])
            guard let last = rows.last else { break }
            for row in rows {
                var values = row.values
                for column in [2, 4] {
                    if case .text(let id) = values[column] { values[column] = bytes.value(id) }
                }
                try sql.execute(
                    """
                    INSERT INTO mutation_results (rowid, user_id, client_id, seq, mutation_id, result, created_at, record_version)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """, values)
            }
            after = last.int(0)
        }
        try sql.execute("DROP TABLE mutation_results_text", [])
    }
}
