/// An app's table said no to a device's change: a NOT NULL, CHECK, UNIQUE
/// or foreign-key violation, a value its column's type cannot hold, or an
/// exception one of its triggers raised. The change is `rejected` with
/// `constraint_violation`, the database's own message, and the column(s)
/// the database named.
struct TableRefusal: Equatable {
    var message: String
    var errors: [String: String]?

    /// The transaction is aborted by the refusal; the push runs again with
    /// a savepoint around each table write.
    struct NeedsSavepoints: Error {}

    init(_ error: DatabaseError, table: MappedTable) {
        message = error.detail.primary ?? error.message
        var columns: [String] = []
        if let column = error.detail.column {
            columns = [column]
        } else if let constraint = error.detail.constraint, let named = table.constraintColumns[constraint] {
            columns = named
        }
        errors = columns.isEmpty ? nil : Dictionary(uniqueKeysWithValues: columns.map { ($0, message) })
    }

    /// Whether the failure is the table's refusal of this change (integrity,
    /// data and trigger errors), not the database being unavailable or
    /// Outpost's own mistake.
    static func isRefusal(_ error: DatabaseError) -> Bool {
        guard let state = error.sqlState else { return false }
        // 22: data exception; 23: integrity constraint; P0: raised by PL/pgSQL;
        // 09: triggered action; 27: triggered data change; 2F/38/39: routine exceptions.
        return ["22", "23", "P0", "09", "27", "2F", "38", "39"].contains(String(state.prefix(2)))
    }
}
