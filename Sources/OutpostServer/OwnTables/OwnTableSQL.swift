import OutpostCore

/// The SQL Outpost adds to a mapped table's database, and the expressions its
/// statements use to read rows: written in one place, so that what
/// `outpost tables sql` prints is exactly what `outpost serve` installs.
///
/// On the app's table only two triggers are added. They note which rows were
/// written by anyone other than Outpost (`own_table_pending`) and wake the
/// servers; they never give versions (a backend transaction changing a
/// million rows would need a million versions of one transaction): the
/// servers' sequencer does (see `OwnTableSequencer`).
package enum OwnTableSQL {
    /// An identifier quoted for SQL (the configuration's names are exact).
    package static func quote(_ name: String) -> String { "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }

    /// A text literal.
    package static func literal(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }

    /// The payload a trigger's notification carries on the commit channel:
    /// not a commit of Outpost's, a row to sequence.
    static let notePayload = "own-table"

    /// The transaction-local setting by which Outpost's own write of a row
    /// (a device's change) tells the trigger not to note it: Outpost writes
    /// its copy of the row in the same transaction. `collection:key` names
    /// one row, `collection:*` every row a statement of the push writes.
    static let writerSetting = "outpost.writer"

    /// What a collection's added objects are called (PostgreSQL cuts names at 63 bytes).
    struct Names {
        let stem: String
        init(_ collection: String) { stem = "outpost_" + collection.prefix(40) }
        var note: String { stem + "_note" }
        var truncate: String { stem + "_truncate" }
    }

    /// A column of row `row` as its JSON value: times as RFC 3339 UTC text
    /// with microseconds (the server's own format), uuids as text, numbers
    /// as PostgreSQL holds them (a numeric keeps its exact decimal text).
    static func value(_ column: MappedColumn, of row: String) -> String {
        let reference = "\(row).\(column.quoted)"
        let format = "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'"
        switch column.kind {
        case .timestamptz: return "to_char(\(reference) AT TIME ZONE 'UTC', \(format))"
        case .timestamp: return "to_char(\(reference), \(format))"
        case .date: return "to_char(\(reference), 'YYYY-MM-DD\"T00:00:00.000000Z\"')"
        case .uuid: return "CAST(\(reference) AS text)"
        case .json: return "CAST(\(reference) AS jsonb)"
        case .text, .integer, .float, .numeric, .boolean: return reference
        }
    }

    /// The row's fields as the JSON object devices see. Built from objects
    /// of at most 40 fields (a function takes at most 100 arguments).
    static func objectExpression(_ table: MappedTable, row: String) -> String {
        guard !table.fields.isEmpty else { return "CAST('{}' AS jsonb)" }
        let parts = stride(from: 0, to: table.fields.count, by: 40).map { start in
            let members = table.fields[start..<min(start + 40, table.fields.count)].map { column in
                "\(literal(column.name)), \(value(column, of: row))"
            }
            return "jsonb_build_object(\(members.joined(separator: ", ")))"
        }
        return parts.joined(separator: " || ")
    }

    /// The row (alias `row`) as the JSON text devices see. Written into
    /// each statement rather than kept as a function: a function taking the
    /// table's row type would stop the app from dropping its own table.
    static func dataText(_ table: MappedTable, row: String) -> String {
        "CAST(\(objectExpression(table, row: row)) AS text)"
    }

    /// The statements that install (or replace) what Outpost adds for `table`.
    /// The trigger functions run as Outpost's role (`SECURITY DEFINER`, every
    /// name qualified), so the backend's roles need no right on Outpost's
    /// tables.
    /// `outpostSchema`: where Outpost's own tables are; `channel`: the
    /// servers' commit channel.
    package static func install(_ table: MappedTable, outpostSchema: String, channel: String) -> [String] {
        let names = Names(table.name)
        let schema = quote(outpostSchema)
        let collection = literal(table.name)
        let key = table.key.quoted
        let queue = """
            INSERT INTO \(schema).own_table_pending (collection, uuid) VALUES (\(collection), row_key)
                    ON CONFLICT (collection, uuid) DO UPDATE SET queued = excluded.queued;
            """
        return [
            // The row's key is noted, unless this is Outpost's own write of
            // that very row (the statement a push ran, not a trigger's write
            // below it), whose copy the push writes itself. Updating the
            // queued position, rather than doing nothing on a key already
            // queued, makes this wait for a sequencer that holds the key:
            // its read of the row may predate this write.
            """
            CREATE OR REPLACE FUNCTION \(schema).\(quote(names.note))() RETURNS trigger LANGUAGE plpgsql
                SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $outpost$
            DECLARE
                row_key text;
            BEGIN
                IF TG_OP = 'DELETE' THEN row_key := CAST(OLD.\(key) AS text); ELSE row_key := CAST(NEW.\(key) AS text); END IF;
                IF pg_trigger_depth() = 1
                    AND current_setting('\(writerSetting)', true) IN (\(collection) || ':' || row_key, \(collection) || ':*') THEN
                    RETURN NULL;
                END IF;
                \(queue)
                IF TG_OP = 'UPDATE' AND OLD.\(key) IS DISTINCT FROM NEW.\(key) THEN
                    row_key := CAST(OLD.\(key) AS text);
                    \(queue)
                END IF;
                PERFORM pg_notify(\(literal(channel)), \(literal(notePayload)));
                RETURN NULL;
            END
            $outpost$
            """,
            // A TRUNCATE names no rows: every row Outpost holds is looked at again.
            """
            CREATE OR REPLACE FUNCTION \(schema).\(quote(names.truncate))() RETURNS trigger LANGUAGE plpgsql
                SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $outpost$
            BEGIN
                INSERT INTO \(schema).own_table_pending (collection, uuid)
                    SELECT collection, uuid FROM \(schema).records WHERE collection = \(collection) AND deleted = 0
                    ON CONFLICT (collection, uuid) DO UPDATE SET queued = excluded.queued;
                PERFORM pg_notify(\(literal(channel)), \(literal(notePayload)));
                RETURN NULL;
            END
            $outpost$
            """,
            "DROP TRIGGER IF EXISTS \(quote(names.note)) ON \(table.tableSQL)",
            """
            CREATE TRIGGER \(quote(names.note)) AFTER INSERT OR UPDATE OR DELETE ON \(table.tableSQL)
                FOR EACH ROW EXECUTE FUNCTION \(schema).\(quote(names.note))()
            """,
            "DROP TRIGGER IF EXISTS \(quote(names.truncate)) ON \(table.tableSQL)",
            """
            CREATE TRIGGER \(quote(names.truncate)) AFTER TRUNCATE ON \(table.tableSQL)
                FOR EACH STATEMENT EXECUTE FUNCTION \(schema).\(quote(names.truncate))()
            """,
        ]
    }

    /// The mark left on the trigger function: what was installed, so a
    /// server finding the same mark installs nothing.
    static func mark(_ statements: [String]) -> String {
        var hash = SHA256()
        for statement in statements { hash.update(Array(statement.utf8)) }
        return "outpost " + hash.finishHex()
    }

    /// `install` followed by the statement leaving its mark: what
    /// `outpost tables sql` prints and `outpost serve` runs.
    package static func installScript(_ table: MappedTable, outpostSchema: String, channel: String) -> [String] {
        let statements = install(table, outpostSchema: outpostSchema, channel: channel)
        return statements + [
            "COMMENT ON FUNCTION \(quote(outpostSchema)).\(quote(Names(table.name).note))() IS \(literal(mark(statements)))"
        ]
    }

    /// The statements that remove what Outpost added on `table` (its rows
    /// in Outpost's own tables are deleted separately).
    package static func detach(collection: String, table tableSQL: String, outpostSchema: String) -> [String] {
        let names = Names(collection)
        let schema = quote(outpostSchema)
        return [
            "DROP TRIGGER IF EXISTS \(quote(names.note)) ON \(tableSQL)",
            "DROP TRIGGER IF EXISTS \(quote(names.truncate)) ON \(tableSQL)",
            "DROP FUNCTION IF EXISTS \(schema).\(quote(names.note))()",
            "DROP FUNCTION IF EXISTS \(schema).\(quote(names.truncate))()",
        ]
    }
}
