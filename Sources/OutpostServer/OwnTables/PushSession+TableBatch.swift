import OutpostCore

/// A push's creates into an app's table, written with a handful of
/// statements for the whole batch instead of several per capture: one
/// look-up of every key, one `INSERT … SELECT FROM unnest(…)` per set of
/// fields sent, one for Outpost's copies and one for their history. A
/// device back from a day offline sends hundreds of captures at once, and a
/// statement per row made intake a round trip per row several times over.
///
/// Only plain cases take this path: new keys (no row, no queued write, no
/// copy), valid, without attachments, each record once in the push. Any
/// other mutation, and every one of a batch the table refuses (under a
/// savepoint, so nothing of it stays), is applied one by one as before.
extension PushSession {
    mutating func prepareTableCreates(_ mutations: [Mutation]) throws {
        var byCollection: [String: [Mutation]] = [:]
        var order: [String] = []
        for mutation in mutations {
            guard mutation.op == .create, let table = config.mappedTables[mutation.collection],
                !table.schema.fields.values.contains(where: { $0.type == .attachment })
            else { continue }
            if byCollection[table.name] == nil { order.append(table.name) }
            byCollection[table.name, default: []].append(mutation)
        }
        for name in order {
            guard let table = config.mappedTables[name], let group = byCollection[name] else { continue }
            try prepareCreates(group, into: table)
        }
    }

    private mutating func prepareCreates(_ mutations: [Mutation], into table: MappedTable) throws {
        // Keys that are new everywhere: no row, no queued write, no copy.
        let keys = mutations.map { $0.uuid.wireText }
        var taken = Set<String>()
        // Three index look-ups by the array (one statement): far cheaper
        // than a probe of each table per key.
        let keyArray = OwnTableCopies.arrayLiteral(keys)
        for row in try sql.query(
            """
            SELECT CAST(r.\(table.key.quoted) AS text) FROM \(table.tableSQL) r
            WHERE r.\(table.key.quoted) = ANY(CAST(? AS \(table.key.sqlType)[]))
            UNION ALL SELECT uuid FROM own_table_pending WHERE collection = ? AND uuid = ANY(CAST(? AS text[]))
            UNION ALL SELECT uuid FROM records WHERE collection = ? AND uuid = ANY(CAST(? AS text[]))
            """, [keyArray, .text(table.name), keyArray, .text(table.name), keyArray])
        {
            taken.insert(row.string(0))
        }
        var plain: [Mutation] = []
        for mutation in mutations where !taken.contains(mutation.uuid.wireText) {
            let data = mutation.data ?? [:]
            guard !data.keys.contains(where: { table.field($0)?.readOnly != false }),
                try Validator(schema: table.schema, referenceExists: { _, _ in true }).problems(changed: data, merged: data).isEmpty
            else { continue }
            plain.append(mutation)
        }
        guard !plain.isEmpty else { return }

        // The table's rows, one statement per set of fields sent (captures of one form share theirs).
        var shapes: [[String]: [Mutation]] = [:]
        var shapeOrder: [[String]] = []
        for mutation in plain {
            let shape = (mutation.data ?? [:]).keys.sorted()
            if shapes[shape] == nil { shapeOrder.append(shape) }
            shapes[shape, default: []].append(mutation)
        }
        try sql.execute("SAVEPOINT own_table_batch", [])
        var stored: [String: OwnTableCopies.TableRow] = [:]
        do {
            for shape in shapeOrder {
                guard let group = shapes[shape] else { continue }
                for row in try sql.query(insertStatement(table, shape: shape), insertArguments(table, shape: shape, group)) {
                    let row = OwnTableCopies.row(row)
                    stored[row.key] = row
                }
            }
        } catch let error as DatabaseError where TableRefusal.isRefusal(error) {
            // Someone's capture breaks a rule: each is tried alone, and only it is refused.
            try sql.execute("ROLLBACK TO SAVEPOINT own_table_batch", [])
            return
        }
        try sql.execute("RELEASE SAVEPOINT own_table_batch", [])

        // Outpost's copies and their history, in two statements.
        let written = plain.filter { stored[$0.uuid.wireText] != nil }
        guard !written.isEmpty else { return }
        let first = try versions.reserve(written.count)
        var columns = Array(repeating: [String?](), count: 9)
        for (offset, mutation) in written.enumerated() {
            let row = stored[mutation.uuid.wireText]!
            let team = row.team ?? principal.team
            let values: [String?] = [
                row.key, String(first + Int64(offset) + 1), row.owner, team, row.window, row.dataText,
                mutation.deviceTime?.rawValue, String(mutation.seq), nil,
            ]
            for index in 0..<9 { columns[index].append(values[index]) }
        }
        let copies = try sql.query(
            """
            INSERT INTO records (collection, uuid, version, updated_at, deleted, owner, team, created_by_user,
                created_by_client, window_at, data, device_time, written_user, written_client, written_seq, written_version)
            SELECT ?, v.uuid, CAST(v.version AS BIGINT), ?, 0, v.owner, v.team, ?, ?, v.window_at, v.data, v.device_time, ?, ?,
                CAST(v.seq AS BIGINT), CAST(v.version AS BIGINT)
            FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]),
                CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]))
                AS v(uuid, version, owner, team, window_at, data, device_time, seq)
            RETURNING uuid, id
            """,
            [.text(table.name), .text(now.rawValue), .text(principal.user), .text(client), .text(principal.user), .text(client)]
                + (0..<8).map { OwnTableCopies.arrayLiteral(columns[$0]) })
        var ids: [String: Int64] = [:]
        for row in copies { ids[row.string(0)] = row.int(1) }
        try sql.execute(
            """
            INSERT INTO record_history (collection, uuid, version, op, at, user_id, client_id, device_time, owner, team, data)
            SELECT ?, v.uuid, CAST(v.version AS BIGINT), 'create', ?, ?, ?, v.device_time, v.owner, v.team, NULL
            FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]))
                AS v(uuid, version, owner, team, device_time)
            """,
            [.text(table.name), .text(now.rawValue), .text(principal.user), .text(client)]
                + [0, 1, 2, 3, 6].map { OwnTableCopies.arrayLiteral(columns[$0]) })
        for (offset, mutation) in written.enumerated() {
            let row = stored[mutation.uuid.wireText]!
            let version = first + Int64(offset) + 1
            let record = ServerRecord(
                id: ids[row.key] ?? 0, collection: table.name, uuid: row.key, version: version, updatedAt: now.rawValue,
                deleted: false, owner: row.owner, team: row.team ?? principal.team, createdByUser: principal.user,
                createdByClient: client, dataText: row.dataText, deviceTime: mutation.deviceTime?.rawValue)
            notice.add(collection: table.name, owner: record.owner, team: record.team)
            prepared[mutation.id] = PushOutcome(status: .applied, record: record)
        }
    }

    /// `INSERT … SELECT FROM unnest(…)` of the key, the owner, the team and the
    /// fields of `shape`, each array cast to its column's type, returning the rows as stored.
    private func insertStatement(_ table: MappedTable, shape: [String]) -> String {
        var columns = [table.key.quoted, table.owner.quoted]
        var values = [TableStatements.cast(table.key, "v.c0"), TableStatements.cast(table.owner, "?")]
        if let team = table.team {
            columns.append(team.quoted)
            values.append(TableStatements.cast(team, "?"))
        }
        var arrays = ["CAST(? AS text[])"]
        var names = ["c0"]
        for (index, name) in shape.enumerated() {
            guard let field = table.field(name) else { continue }
            columns.append(field.quoted)
            values.append(TableStatements.cast(field, "v.c\(index + 1)"))
            arrays.append("CAST(? AS text[])")
            names.append("c\(index + 1)")
        }
        return """
            INSERT INTO \(table.tableSQL) AS r (\(columns.joined(separator: ", ")))
            SELECT \(values.joined(separator: ", "))
            FROM unnest(\(arrays.joined(separator: ", "))) AS v(\(names.joined(separator: ", "))),
                (SELECT set_config('\(OwnTableSQL.writerSetting)', ?, true)) AS outpost_writer
            RETURNING \(OwnTableCopies.rowColumns(table))
            """
    }

    private func insertArguments(_ table: MappedTable, shape: [String], _ group: [Mutation]) -> [SQLValue] {
        var arguments: [SQLValue] = [.text(principal.user)]
        if table.team != nil { arguments.append(.text(principal.team)) }
        arguments.append(OwnTableCopies.arrayLiteral(group.map { $0.uuid.wireText }))
        for name in shape {
            guard let field = table.field(name) else { continue }
            arguments.append(
                OwnTableCopies.arrayLiteral(
                    group.map { mutation -> String? in
                        guard case .text(let text) = TableStatements.value(mutation.data?[name] ?? .null, field) else { return nil }
                        return text
                    }))
        }
        // Every row of this statement is Outpost's own write: the trigger leaves them all.
        arguments.append(.text("\(table.name):*"))
        return arguments
    }
}
