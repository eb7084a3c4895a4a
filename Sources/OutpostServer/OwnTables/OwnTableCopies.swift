import OutpostCore

/// Outpost's copy of each row of a mapped table, in `records`: the row as
/// devices see it (`data`, built from its columns by SQL), its owner
/// and team, and the feed version of its last change. Every read path (pull,
/// stream, search, console) serves it like any other record; the app's
/// table stays the one truth, and a copy is only ever written from a row
/// read in the same transaction.
enum OwnTableCopies {
    /// A row of the app's table as Outpost reads it.
    struct TableRow: Equatable {
        var key: String
        var owner: String
        /// The team column's value; nil when the table has none (or NULL).
        var team: String?
        var dataText: String
        /// The window field's value in the server's time format.
        var window: String?
    }

    /// Who made a write a device sent (pushes); nil for the table's other writers.
    struct Writer {
        var user: String
        var client: String
        var seq: Int64
        var deviceTime: String?
    }

    /// The select list that reads a row (alias `r`) as a `TableRow`.
    static func rowColumns(_ table: MappedTable) -> String {
        let team = table.team.map { "CAST(r.\($0.quoted) AS text)" } ?? "NULL"
        let window = table.mapping.windowField.flatMap(table.field).map { OwnTableSQL.value($0, of: "r") } ?? "NULL"
        return "CAST(r.\(table.key.quoted) AS text), CAST(r.\(table.owner.quoted) AS text), \(team), "
            + "\(OwnTableSQL.dataText(table, row: "r")), \(window)"
    }

    static func row(_ row: SQLRow) -> TableRow {
        TableRow(
            key: row.string(0), owner: row.string(1), team: row.optionalString(2), dataText: row.string(3),
            window: row.optionalString(4))
    }

    /// An array parameter of text values (`CAST(? AS type[])`).
    static func arrayLiteral(_ values: [String]) -> SQLValue { arrayLiteral(values.map(Optional.some)) }

    /// The same, with NULL elements. Escaped byte by byte: the results a push
    /// stores are JSON full of quotes, and Foundation's string replacing was
    /// half of a push's server time.
    static func arrayLiteral(_ values: [String?]) -> SQLValue {
        var out: [UInt8] = [UInt8(ascii: "{")]
        out.reserveCapacity(values.reduce(2) { $0 + ($1?.utf8.count ?? 4) + 3 })
        for (index, value) in values.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            guard let value else {
                out.append(contentsOf: "NULL".utf8)
                continue
            }
            out.append(UInt8(ascii: "\""))
            for byte in value.utf8 {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { out.append(UInt8(ascii: "\\")) }
                out.append(byte)
            }
            out.append(UInt8(ascii: "\""))
        }
        out.append(UInt8(ascii: "}"))
        return .text(String(decoding: out, as: UTF8.self))
    }

    /// The rows of `keys` as the table holds them now (absent: deleted).
    static func read(_ table: MappedTable, keys: [String], in sql: any SQLExecutor) throws
        -> [String: TableRow]
    {
        var rows: [String: TableRow] = [:]
        for found in try sql.query(
            "SELECT \(rowColumns(table)) FROM \(table.tableSQL) r WHERE r.\(table.key.quoted) = ANY(CAST(? AS \(table.key.sqlType)[]))",
            [arrayLiteral(keys)])
        {
            let row = row(found)
            rows[row.key] = row
        }
        return rows
    }

    /// Brings the copies of `keys` in line with the table: each changed row
    /// gets the next feed version, a deleted one a tombstone, a row whose
    /// owner or team changed a scope exit for those who lose it. A row that
    /// is as the copy says gets nothing. Run with the keys' queue rows
    /// locked (or removed) by the caller.
    static func settle(
        _ table: MappedTable, keys: [String], versions: inout FeedVersions, now: ServerTimestamp,
        notice: inout CommitNotice, in sql: any SQLExecutor
    ) throws {
        guard !keys.isEmpty else { return }
        let rows = try read(table, keys: keys, in: sql)
        var copies: [String: ServerRecord] = [:]
        for found in try sql.query(
            "SELECT \(ServerRecord.columns) FROM records WHERE collection = ? AND uuid = ANY(CAST(? AS text[]))\(sql.forUpdate)",
            [.text(table.name), arrayLiteral(keys)])
        {
            let record = ServerRecord(found)
            copies[record.uuid] = record
        }
        var teams = TeamLookup()
        for key in keys {
            let copy = copies[key]
            guard let row = rows[key] else {
                if let copy, !copy.deleted {
                    _ = try write(
                        table, key: key, copy: copy, row: nil, team: copy.team, by: nil, versions: &versions, now: now,
                        notice: &notice, in: sql)
                }
                continue
            }
            let team = try row.team ?? (copy?.owner == row.owner ? copy?.team : nil) ?? teams.team(of: row.owner, in: sql)
                ?? copy?.team ?? ""
            if let copy, !copy.deleted, copy.dataText == row.dataText, copy.owner == row.owner, copy.team == team { continue }
            _ = try write(
                table, key: key, copy: copy, row: row, team: team, by: nil, versions: &versions, now: now, notice: &notice,
                in: sql)
        }
    }

    /// Writes the copy of `key` as `row` (nil: deleted) at the next version,
    /// with its history, and a scope exit when its owner or team changed.
    static func write(
        _ table: MappedTable, key: String, copy: ServerRecord?, row: TableRow?, team: String, by writer: Writer?,
        versions: inout FeedVersions, now: ServerTimestamp, notice: inout CommitNotice, in sql: any SQLExecutor
    ) throws -> ServerRecord? {
        let user = writer?.user ?? ""
        let client = writer?.client ?? ""
        guard var record = copy else {
            guard let row else { return nil }
            let version = try versions.next()
            let id = try sql.insertReturningID(
                """
                INSERT INTO records (collection, uuid, version, updated_at, deleted, owner, team, created_by_user,
                    created_by_client, window_at, data, device_time, written_user, written_client, written_seq, written_version)
                VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(table.name), .text(key), .integer(version), .text(now.rawValue), .text(row.owner), .text(team),
                    .text(writer?.user ?? row.owner), .text(client), .text(row.window), .text(row.dataText),
                    .text(writer?.deviceTime), .text(writer?.user), .text(writer?.client), .integer(writer?.seq),
                    .integer(writer == nil ? nil : version),
                ])
            let stored = ServerRecord(
                id: id, collection: table.name, uuid: key, version: version, updatedAt: now.rawValue, deleted: false,
                owner: row.owner, team: team, createdByUser: writer?.user ?? row.owner, createdByClient: client,
                dataText: row.dataText, deviceTime: writer?.deviceTime)
            notice.add(collection: table.name, owner: row.owner, team: team)
            try RecordHistory.keep(stored, op: .create, replacing: nil, user: user, client: client, in: sql)
            return stored
        }
        try versions.requireNewer(than: record.version)
        let previous = record
        notice.add(collection: table.name, owner: record.owner, team: record.team)
        if let row, !record.deleted, row.owner != record.owner || team != record.team {
            // Those who lose the record are told at a version of its own, before the record's new one.
            try sql.execute(
                "INSERT INTO scope_exits (version, collection, uuid, old_owner, old_team, at) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    .integer(try versions.next()), .text(table.name), .text(key), .text(record.owner), .text(record.team),
                    .text(now.rawValue),
                ])
        }
        let version = try versions.next()
        record.version = version
        record.updatedAt = now.rawValue
        record.deleted = row == nil
        record.dataText = row?.dataText
        record.deviceTime = writer?.deviceTime
        if let row {
            record.owner = row.owner
            record.team = team
        }
        notice.add(collection: table.name, owner: record.owner, team: record.team)
        try sql.execute(
            """
            UPDATE records SET version = ?, updated_at = ?, deleted = ?, owner = ?, team = ?, window_at = ?, data = ?,
                device_time = ?, written_user = ?, written_client = ?, written_seq = ?, written_version = ?
            WHERE id = ?
            """,
            [
                .integer(version), .text(now.rawValue), .bool(row == nil), .text(record.owner), .text(record.team),
                .text(row?.window), .text(row?.dataText), .text(writer?.deviceTime), .text(writer?.user),
                .text(writer?.client), .integer(writer?.seq), .integer(writer == nil ? nil : version), .integer(record.id),
            ])
        let op: RecordHistory.Operation = row == nil ? .delete : previous.deleted ? .create : .update
        try RecordHistory.keep(record, op: op, replacing: previous, user: user, client: client, in: sql)
        return record
    }

    /// The team of a row written by someone other than a device, when the
    /// table has no team column: the team the owner's newest token names.
    struct TeamLookup {
        private var known: [String: String?] = [:]

        mutating func team(of owner: String, in sql: any SQLExecutor) throws -> String? {
            if let team = known[owner] { return team }
            let team = try sql.first(
                "SELECT team FROM tokens WHERE user_id = ? ORDER BY created_at DESC LIMIT 1", [.text(owner)])?.optionalString(0)
            known[owner] = team
            return team
        }
    }
}
