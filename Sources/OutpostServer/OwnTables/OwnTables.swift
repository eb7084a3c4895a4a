import Foundation
import OutpostCore

/// What a server does with the configuration's mapped tables when it starts:
/// reads each table's columns from the catalog (refusing one it cannot
/// sync), installs the triggers Outpost needs unless an administrator
/// applied exactly these already, and notes each table for its backfill.
package enum OwnTables {
    /// The schema Outpost's own tables are in (the connection's current schema).
    package static func outpostSchema(_ database: any ServerDatabase) throws -> String {
        try database.read { try $0.first("SELECT current_schema()")?.optionalString(0) } ?? "public"
    }

    /// Reads every mapped table of `config` from the database's catalog.
    package static func resolve(_ config: ServerConfig, in database: any ServerDatabase) throws -> [String: MappedTable] {
        guard !config.tableMappings.isEmpty else { return [:] }
        guard database.dialect == .postgres else {
            let names = config.tableMappings.keys.sorted().map { "'\($0)'" }.joined(separator: ", ")
            throw ConfigError(
                "the collection(s) \(names) map tables of the app's own database, which needs the PostgreSQL backend (--database postgres://…)")
        }
        return try database.read { sql in
            var tables: [String: MappedTable] = [:]
            for mapping in config.tableMappings.values.sorted(by: { $0.name < $1.name }) {
                tables[mapping.name] = try TableCatalog.read(mapping, among: config.tableMappings, in: sql)
            }
            return tables
        }
    }

    /// The configuration with the mapped tables' collections added.
    package static func serving(_ config: ServerConfig, tables: [String: MappedTable]) throws -> ServerConfig {
        var config = config
        config.mappedTables = tables
        for table in tables.values { config.collections[table.name] = table.schema }
        for schema in config.collections.values {
            for (field, target) in schema.references where config.collections[target] == nil {
                throw ConfigError("the field '\(schema.name).\(field)' references the unknown collection '\(target)'")
            }
        }
        return config
    }

    /// Installs what each table needs, unless it is there as this version
    /// would install it (then the server's role needs no right to change
    /// the schema: an administrator applied `outpost tables sql`).
    package static func install(_ tables: [String: MappedTable], in database: any ServerDatabase) throws {
        guard !tables.isEmpty else { return }
        let schema = try outpostSchema(database)
        let channel = PostgresCommitListener.channel(schema: schema)
        for table in tables.values.sorted(by: { $0.name < $1.name }) {
            let script = OwnTableSQL.installScript(table, outpostSchema: schema, channel: channel)
            let mark = OwnTableSQL.mark(Array(script.dropLast()))
            try database.write { sql in
                // Servers starting together install once.
                _ = try sql.query(PostgresDatabase.writeLockStatement, [])
                if try installedMark(table, outpostSchema: schema, in: sql) != mark {
                    do {
                        for statement in script { try sql.execute(statement, []) }
                    } catch let error as DatabaseError where error.sqlState == "42501" {
                        throw ConfigError(
                            "the server's database role may not add Outpost's triggers to \(table.mapping.qualifiedName) (\(error.detail.primary ?? error.message)): give it the right, or have an administrator run the output of `outpost tables sql`")
                    }
                }
                try sql.execute(
                    "INSERT INTO own_tables (collection, table_name) VALUES (?, ?) ON CONFLICT (collection) DO UPDATE SET table_name = excluded.table_name",
                    [.text(table.name), .text(table.tableSQL)])
            }
        }
    }

    /// The SQL `install` would run for every mapped table of `config`, as
    /// one script (`outpost tables sql`). Outpost's own tables are migrated
    /// first: the triggers write to them.
    package static func script(for config: ServerConfig, in database: any ServerDatabase) throws -> String {
        try ServerSchema.migrate(database)
        let tables = try resolve(config, in: database)
        let schema = try outpostSchema(database)
        let channel = PostgresCommitListener.channel(schema: schema)
        var text = "-- What Outpost installs on the app's own tables (outpost tables sql).\n-- Outpost's schema: \(schema)\n"
        for table in tables.values.sorted(by: { $0.name < $1.name }) {
            text += "\n-- \(table.mapping.qualifiedName) as the collection '\(table.name)'\n"
            for statement in OwnTableSQL.installScript(table, outpostSchema: schema, channel: channel) {
                text += statement + ";\n"
            }
        }
        return text
    }

    /// Where Outpost's copies of `table` differ from the table itself (after
    /// the queue was drained): a row without a live copy, a live copy
    /// without a row, a copy whose data, owner or team is not the row's.
    /// Empty when they agree.
    package static func copyMismatches(_ table: MappedTable, in database: any ServerDatabase) throws -> [String] {
        try database.read { sql in
            var copies: [String: ServerRecord] = [:]
            for row in try sql.query("SELECT \(ServerRecord.columns) FROM records WHERE collection = ? AND deleted = 0", [.text(table.name)]) {
                let record = ServerRecord(row)
                copies[record.uuid] = record
            }
            var mismatches: [String] = []
            for found in try sql.query("SELECT \(OwnTableCopies.rowColumns(table)) FROM \(table.tableSQL) r", []) {
                let row = OwnTableCopies.row(found)
                guard let copy = copies.removeValue(forKey: row.key) else {
                    mismatches.append("\(table.name) \(row.key) is in the table but has no live copy")
                    continue
                }
                if copy.dataText != row.dataText || copy.owner != row.owner || (row.team.map { $0 != copy.team } ?? false) {
                    mismatches.append("\(table.name) \(row.key): the copy says \(copy.owner) \(copy.dataText ?? "null"), the table \(row.owner) \(row.dataText)")
                }
            }
            for key in copies.keys.sorted() { mismatches.append("\(table.name) \(key) has a live copy but no row in the table") }
            return mismatches
        }
    }

    /// The mark on the table's trigger function, when its trigger is in place.
    static func installedMark(_ table: MappedTable, outpostSchema: String, in sql: any SQLExecutor) throws -> String? {
        let names = OwnTableSQL.Names(table.name)
        let function = "\(OwnTableSQL.quote(outpostSchema)).\(OwnTableSQL.quote(names.note))()"
        return try sql.first(
            """
            SELECT obj_description(to_regprocedure(?), 'pg_proc')
            WHERE EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass(?) AND tgname = ?)
                AND EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass(?) AND tgname = ?)
            """,
            [
                .text(function), .text(table.tableSQL), .text(names.note), .text(table.tableSQL), .text(names.truncate),
            ])?.optionalString(0)
    }

    /// Removes what Outpost added for the collection `name`: the triggers
    /// and functions on its table, and every row Outpost keeps about it
    /// (copies, history, scope exits, queue, backfill). The app's table, its
    /// rows, columns, constraints, indexes and own triggers are untouched.
    /// Returns the table's name, or nil when nothing was attached under `name`.
    @discardableResult
    package static func detach(_ name: String, in database: any ServerDatabase) throws -> String? {
        let schema = try outpostSchema(database)
        return try database.write { sql -> String? in
            _ = try sql.query(PostgresDatabase.writeLockStatement, [])
            guard let table = try sql.first("SELECT table_name FROM own_tables WHERE collection = ?", [.text(name)])?.string(0)
            else { return nil }
            let exists = try sql.first("SELECT to_regclass(?) IS NOT NULL", [.text(table)])?.bool(0) == true
            for statement in OwnTableSQL.detach(collection: name, table: table, outpostSchema: schema)
            where exists || statement.hasPrefix("DROP FUNCTION") {
                try sql.execute(statement, [])
            }
            for statement in [
                "DELETE FROM blob_refs WHERE collection = ?", "DELETE FROM record_history WHERE collection = ?",
                "DELETE FROM scope_exits WHERE collection = ?", "DELETE FROM records WHERE collection = ?",
                "DELETE FROM own_table_pending WHERE collection = ?", "DELETE FROM own_tables WHERE collection = ?",
            ] {
                try sql.execute(statement, [.text(name)])
            }
            return table
        }
    }
}
