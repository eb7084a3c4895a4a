import OutpostCore

/// A mapped table as the database describes it, read when the server starts:
/// its key, owner and team columns, and every other column as a field with
/// the type devices see (`schema`).
package struct MappedTable: Sendable {
    package var mapping: TableMapping
    package var key: MappedColumn
    package var owner: MappedColumn
    package var team: MappedColumn?
    /// The columns devices see, in the table's order.
    package var fields: [MappedColumn]
    /// Each constraint's and unique index's columns, by name: a refusal
    /// that names a constraint names its columns to the device.
    package var constraintColumns: [String: [String]]
    /// The collection as devices and the push's checks see it.
    package var schema: CollectionSchema

    package var name: String { mapping.name }

    /// The table's name quoted for SQL.
    package var tableSQL: String { "\(OwnTableSQL.quote(mapping.schema)).\(OwnTableSQL.quote(mapping.table))" }

    package func field(_ name: String) -> MappedColumn? { fields.first { $0.name == name } }
}

/// One column of a mapped table.
package struct MappedColumn: Sendable, Equatable {
    package var name: String
    /// The column's type as PostgreSQL writes it (`numeric(8,2)`), for casts.
    package var sqlType: String
    package var kind: ColumnKind
    /// Computed by the database (`GENERATED ALWAYS AS …`): never written.
    package var generated = false
    /// Named in `read_only_columns`, or generated.
    package var readOnly = false

    package var quoted: String { OwnTableSQL.quote(name) }
}

/// How a column's values travel: each kind has one field type and one way
/// of being written to JSON and read back from a device's value.
package enum ColumnKind: Sendable, Equatable {
    case text, uuid, integer, float, numeric, boolean, timestamptz, timestamp, date, json

    /// The kind of a column of PostgreSQL type `name` (its base type for a
    /// domain), or nil when Outpost cannot carry it.
    init?(typeName name: String) {
        switch name {
        case "text", "varchar", "bpchar", "citext", "name": self = .text
        case "uuid": self = .uuid
        case "int2", "int4", "int8": self = .integer
        case "float4", "float8": self = .float
        case "numeric": self = .numeric
        case "bool": self = .boolean
        case "timestamptz": self = .timestamptz
        case "timestamp": self = .timestamp
        case "date": self = .date
        case "json", "jsonb": self = .json
        default: return nil
        }
    }

    var fieldType: FieldType {
        switch self {
        case .text, .uuid: return .text
        case .integer: return .integer
        case .float, .numeric: return .number
        case .boolean: return .boolean
        case .timestamptz, .timestamp, .date: return .timestamp
        case .json: return .json
        }
    }

    /// Whether a field of this column may be declared `type` instead.
    func accepts(_ type: FieldType) -> Bool {
        if type == fieldType { return true }
        switch (self, type) {
        case (.text, .reference), (.uuid, .reference), (.json, .attachment), (.numeric, .integer), (.float, .integer):
            return true
        default:
            return false
        }
    }
}
