import OutpostCore

/// The statement a device's change becomes on an app's table.
///
/// Each names this write to the table's trigger (the transaction-local
/// `outpost.writer` setting, set by a one-row subquery the statement reads
/// before it changes the row), so the trigger does not queue the row: the
/// push writes Outpost's copy itself, from what `RETURNING` hands back
/// (the row as stored, with the table's defaults and trigger-computed values).
enum TableStatements {
    struct Statement {
        var text: String
        var arguments: [SQLValue]
    }

    static func statement(for mutation: Mutation, _ table: MappedTable, sent: JSONObject, user: String, team: String)
        -> Statement
    {
        let uuid = mutation.uuid.wireText
        let writer = "(SELECT set_config('\(OwnTableSQL.writerSetting)', ?, true)) AS outpost_writer"
        let mark = SQLValue.text("\(table.name):\(uuid)")
        let keyMatch = "r.\(table.key.quoted) = \(cast(table.key))"
        let returning = " RETURNING \(OwnTableCopies.rowColumns(table))"
        // Sorted, so one shape of change is one prepared statement.
        let fields = sent.keys.sorted().compactMap { table.field($0) }
        switch mutation.op {
        case .create:
            var columns = [table.key.quoted, table.owner.quoted]
            var values = [cast(table.key), cast(table.owner)]
            var arguments: [SQLValue] = [.text(uuid), .text(user)]
            if let teamColumn = table.team {
                columns.append(teamColumn.quoted)
                values.append(cast(teamColumn))
                arguments.append(.text(team))
            }
            for field in fields {
                columns.append(field.quoted)
                values.append(cast(field))
                arguments.append(value(sent[field.name] ?? .null, field))
            }
            return Statement(
                text: "INSERT INTO \(table.tableSQL) AS r (\(columns.joined(separator: ", "))) SELECT \(values.joined(separator: ", ")) FROM \(writer)"
                    + returning,
                arguments: arguments + [mark])
        case .update:
            let assignments =
                fields.isEmpty
                ? ["\(table.key.quoted) = r.\(table.key.quoted)"] : fields.map { "\($0.quoted) = \(cast($0))" }
            return Statement(
                text: "UPDATE \(table.tableSQL) AS r SET \(assignments.joined(separator: ", ")) FROM \(writer) WHERE \(keyMatch)"
                    + returning,
                arguments: fields.map { value(sent[$0.name] ?? .null, $0) } + [mark, .text(uuid)])
        case .delete:
            return Statement(
                text: "DELETE FROM \(table.tableSQL) AS r USING \(writer) WHERE \(keyMatch) RETURNING 1",
                arguments: [mark, .text(uuid)])
        }
    }

    /// A placeholder cast to the column's type. Times arrive as RFC 3339
    /// text; a column without a time zone (or a date) holds them in UTC.
    static func cast(_ column: MappedColumn, _ expression: String = "?") -> String {
        switch column.kind {
        case .timestamp, .date: return "CAST(CAST(\(expression) AS timestamptz) AT TIME ZONE 'UTC' AS \(column.sqlType))"
        default: return "CAST(\(expression) AS \(column.sqlType))"
        }
    }

    /// A device's JSON value as the text PostgreSQL reads for the column.
    static func value(_ value: JSONValue, _ column: MappedColumn) -> SQLValue {
        switch value {
        case .null: return .null
        case .string(let text): return column.kind == .json ? .text((try? value.jsonText()) ?? "null") : .text(text)
        case .bool(let flag): return .text(flag ? "true" : "false")
        case .int(let number): return .text(String(number))
        case .double(let number): return .text(column.kind == .json ? ((try? value.jsonText()) ?? "null") : "\(number)")
        case .array, .object: return .text((try? value.jsonText()) ?? "null")
        }
    }
}
