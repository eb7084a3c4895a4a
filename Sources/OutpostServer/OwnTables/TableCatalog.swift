import OutpostCore

/// Reads a mapped table's columns, key and constraints from PostgreSQL's
/// catalog, and refuses, in one sentence naming the table, the column and
/// its type, a table Outpost cannot sync as configured.
enum TableCatalog {
    static func read(_ mapping: TableMapping, among mappings: [String: TableMapping], in sql: any SQLExecutor) throws
        -> MappedTable
    {
        let table = mapping.qualifiedName
        let relation = "\(OwnTableSQL.quote(mapping.schema)).\(OwnTableSQL.quote(mapping.table))"
        guard try sql.first("SELECT to_regclass(?) IS NOT NULL", [.text(relation)])?.bool(0) == true else {
            throw ConfigError("the collection '\(mapping.name)' maps the table \(table), which does not exist in the database")
        }
        // Each column: name, type as written, base type's name, generated.
        let rows = try sql.query(
            """
            SELECT a.attname, format_type(a.atttypid, a.atttypmod),
                CASE WHEN t.typtype = 'd' THEN (SELECT b.typname FROM pg_type b WHERE b.oid = t.typbasetype) ELSE t.typname END,
                a.attgenerated <> ''
            FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
            WHERE a.attrelid = to_regclass(?) AND a.attnum > 0 AND NOT a.attisdropped
            ORDER BY a.attnum
            """, [.text(relation)])
        var columns: [String: MappedColumn] = [:]
        var order: [String] = []
        var unsupported: [String: String] = [:]
        for row in rows {
            let name = row.string(0)
            order.append(name)
            guard let kind = ColumnKind(typeName: row.string(2)) else {
                unsupported[name] = row.string(1)
                continue
            }
            columns[name] = MappedColumn(name: name, sqlType: row.string(1), kind: kind, generated: row.bool(3))
        }
        func column(_ name: String, as role: String) throws -> MappedColumn {
            if let type = unsupported[name] {
                throw ConfigError("the column \(table).\(name) (\(role)) has type \(type), which Outpost cannot carry")
            }
            guard let found = columns[name] else {
                throw ConfigError("the collection '\(mapping.name)' names the column \(table).\(name) (\(role)), which does not exist")
            }
            return found
        }
        let key = try column(mapping.key, as: "the key")
        let primary = try sql.query(
            """
            SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
            WHERE i.indrelid = to_regclass(?) AND i.indisprimary
            """, [.text(relation)]).map { $0.string(0) }
        guard primary == [mapping.key] else {
            let actual = primary.isEmpty ? "it has none" : "it is (\(primary.joined(separator: ", ")))"
            throw ConfigError("the key \(table).\(mapping.key) must be the table's primary key, and \(actual)")
        }
        guard key.kind == .uuid || key.kind == .text else {
            throw ConfigError(
                "the key \(table).\(mapping.key) has type \(key.sqlType): it must be uuid or text holding a UUID")
        }
        let owner = try column(mapping.ownerColumn, as: "the owner")
        let team = try mapping.teamColumn.map { try column($0, as: "the team") }
        for name in mapping.readOnlyColumns { _ = try column(name, as: "read-only") }
        for name in mapping.declaredFields.keys { _ = try column(name, as: "a field") }

        // Foreign keys of one column to another mapped table's key are references.
        var references: [String: String] = [:]
        for row in try sql.query(
            """
            SELECT a.attname, n.nspname, c.relname, fa.attname
            FROM pg_constraint k
            JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1]
            JOIN pg_class c ON c.oid = k.confrelid JOIN pg_namespace n ON n.oid = c.relnamespace
            JOIN pg_attribute fa ON fa.attrelid = k.confrelid AND fa.attnum = k.confkey[1]
            WHERE k.conrelid = to_regclass(?) AND k.contype = 'f' AND array_length(k.conkey, 1) = 1
            """, [.text(relation)])
        {
            if let target = mappings.values.first(where: {
                $0.schema == row.string(1) && $0.table == row.string(2) && $0.key == row.string(3)
            }) {
                references[row.string(0)] = target.name
            }
        }

        var fields: [MappedColumn] = []
        var schemaFields: [String: FieldSchema] = [:]
        let special = Set([mapping.key, mapping.ownerColumn] + (mapping.teamColumn.map { [$0] } ?? []))
        for name in order where !special.contains(name) {
            guard var field = columns[name] else {
                throw ConfigError("the column \(table).\(name) has type \(unsupported[name] ?? "?"), which Outpost cannot carry")
            }
            guard CollectionSchema.isValidName(name) else {
                throw ConfigError(
                    "the column \(table).\(name) cannot be a field: field names are lowercase letters, digits and _")
            }
            field.readOnly = field.generated || mapping.readOnlyColumns.contains(name)
            var schema = FieldSchema(references[name].map { .reference(collection: $0) } ?? field.kind.fieldType)
            if let declared = mapping.declaredFields[name] {
                guard field.kind.accepts(declared.type) || declared.type == schema.type else {
                    throw ConfigError(
                        "the field '\(mapping.name).\(name)' is declared \(declared.type) but the column \(table).\(name) has type \(field.sqlType)")
                }
                schema = declared
            }
            fields.append(field)
            schemaFields[name] = schema
        }
        if let window = mapping.windowField {
            guard let field = fields.first(where: { $0.name == window }), field.kind.fieldType == .timestamp else {
                throw ConfigError("the window field '\(mapping.name).\(window)' must be a timestamp, timestamptz or date column")
            }
        }

        var constraintColumns: [String: [String]] = [:]
        for row in try sql.query(
            """
            SELECT k.conname, array_to_string(ARRAY(SELECT a.attname FROM pg_attribute a
                WHERE a.attrelid = k.conrelid AND a.attnum = ANY(k.conkey) ORDER BY a.attnum), ',')
            FROM pg_constraint k WHERE k.conrelid = to_regclass(?)
            UNION ALL
            SELECT c.relname, array_to_string(ARRAY(SELECT a.attname FROM pg_attribute a
                WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) ORDER BY a.attnum), ',')
            FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = to_regclass(?)
            """, [.text(relation), .text(relation)])
        {
            let names = row.string(1).split(separator: ",").map(String.init)
            if !names.isEmpty { constraintColumns[row.string(0)] = names }
        }

        let schema = CollectionSchema(
            name: mapping.name, fields: schemaFields, policy: mapping.policy, windowField: mapping.windowField)
        return MappedTable(
            mapping: mapping, key: key, owner: owner, team: team, fields: fields, constraintColumns: constraintColumns,
            schema: schema)
    }
}
