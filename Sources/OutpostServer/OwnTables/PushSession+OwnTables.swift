import OutpostCore

/// A device's change to a mapped table: written into the app's table as
/// `INSERT`, `UPDATE` of the sent fields, or `DELETE`, so the table's own
/// defaults, constraints and triggers decide; Outpost's copy, its history
/// and the dedupe row follow in the same transaction.
extension PushSession {
    mutating func applyToTable(_ mutation: Mutation, _ table: MappedTable) throws -> PushOutcome {
        func result(_ status: MutationStatus, _ record: ServerRecord? = nil, code: String? = nil, errors: [String: String]? = nil)
            -> PushOutcome
        {
            PushOutcome(status: status, record: record, code: code, errors: errors)
        }
        let uuid = mutation.uuid.wireText
        let found = try lockRow(table, uuid)
        var existing = try load(table.name, uuid, forUpdate: true)
        // The copy must say what the table holds before the checks: a write
        // of the row still queued, a row not yet given its copy (the
        // backfill goes on), or a copy whose row is gone though no trigger
        // said so (the table's triggers were off).
        if found.queued || (found.row && existing == nil) || (!found.row && existing.map { !$0.deleted } == true) {
            try OwnTableCopies.settle(table, keys: [uuid], versions: &versions, now: now, notice: &notice, in: sql)
            if found.queued {
                try sql.execute("DELETE FROM own_table_pending WHERE collection = ? AND uuid = ?", [.text(table.name), .text(uuid)])
            }
            existing = try load(table.name, uuid, forUpdate: true)
        }
        let schema = table.schema
        if let outcome = try meets(mutation, existing, policy: schema.policy) { return outcome }
        let sent = mutation.op == .delete ? [:] : (mutation.data ?? [:])
        let readOnly = sent.keys.filter { table.field($0)?.readOnly == true }.sorted()
        if !readOnly.isEmpty {
            return result(
                .rejected, code: "read_only_field",
                errors: Dictionary(uniqueKeysWithValues: readOnly.map { ($0, "is set by the database, not by devices") }))
        }
        if mutation.op != .delete {
            let merged = mutation.op == .create ? sent : (try existing?.data() ?? [:]).applyingPatch(sent)
            // References are checked by the table's foreign keys (a refusal names the column).
            let problems = try Validator(schema: schema) { _, _ in true }.problems(changed: sent, merged: merged)
            guard problems.isEmpty else { return result(.rejected, code: "invalid_field", errors: problems) }
            // A photo a field names must be on the server whole, as for every collection.
            let missing = try missingAttachments(schema, changed: sent, before: try existing?.data())
            guard missing.isEmpty else { return result(.rejected, code: "missing_attachment", errors: missing) }
        }

        let written: OwnTableCopies.TableRow?
        switch try writeRow(mutation, table, sent) {
        case .refused(let refusal):
            var outcome = result(.rejected, code: "constraint_violation", errors: refusal.errors)
            outcome.message = refusal.message
            return outcome
        case .missing:
            // The row is gone though no trigger said so (its triggers were
            // off): the copy follows the table, and the change conflicts.
            try OwnTableCopies.settle(table, keys: [uuid], versions: &versions, now: now, notice: &notice, in: sql)
            return result(.conflict, try load(table.name, uuid))
        case .written(let row):
            written = row
        }
        let team = written?.team ?? (mutation.op == .create ? principal.team : existing?.team ?? principal.team)
        let writer = OwnTableCopies.Writer(
            user: principal.user, client: client, seq: mutation.seq, deviceTime: mutation.deviceTime?.rawValue)
        let stored = try OwnTableCopies.write(
            table, key: uuid, copy: existing, row: written, team: team, by: writer, versions: &versions, now: now,
            notice: &notice, in: sql)
        // Whoever can read the record can read the photos it names.
        try recordReferences(schema, collection: table.name, uuid: uuid, data: try stored?.data())
        return result(.applied, stored)
    }

    /// Locks the app's row (another writer of it waits for this push) and
    /// its queue entry; says whether each is there.
    private func lockRow(_ table: MappedTable, _ uuid: String) throws -> (row: Bool, queued: Bool) {
        let row = try sql.first(
            "SELECT 1 FROM \(table.tableSQL) r WHERE r.\(table.key.quoted) = CAST(? AS \(table.key.sqlType)) FOR UPDATE",
            [.text(uuid)])
        // A statement of its own, so its snapshot follows the row lock and sees the
        // queue row of a backend transaction this push waited for (one taken before the wait missed it).
        let queued = try sql.first(
            "SELECT 1 FROM own_table_pending WHERE collection = ? AND uuid = ? FOR UPDATE", [.text(table.name), .text(uuid)])
        return (row != nil, queued != nil)
    }

    enum TableWrite {
        /// The row as the table holds it after the write (nil: deleted).
        case written(OwnTableCopies.TableRow?)
        /// The table refused it.
        case refused(TableRefusal)
        /// An update or delete found no row.
        case missing
    }

    /// Runs the mutation's statement on the app's table. Without
    /// savepoints (the usual case), a refusal aborts the transaction: the
    /// push is then run again with a savepoint around each table write
    /// (``TableRefusal/NeedsSavepoints``), and this mutation alone is refused.
    private func writeRow(_ mutation: Mutation, _ table: MappedTable, _ sent: JSONObject) throws -> TableWrite {
        let statement = TableStatements.statement(for: mutation, table, sent: sent, user: principal.user, team: principal.team)
        if usesSavepoints { try sql.execute("SAVEPOINT own_table_write", []) }
        let rows: [SQLRow]
        do {
            rows = try sql.query(statement.text, statement.arguments)
        } catch let error as DatabaseError where TableRefusal.isRefusal(error) {
            guard usesSavepoints else { throw TableRefusal.NeedsSavepoints() }
            try sql.execute("ROLLBACK TO SAVEPOINT own_table_write", [])
            return .refused(TableRefusal(error, table: table))
        }
        if usesSavepoints { try sql.execute("RELEASE SAVEPOINT own_table_write", []) }
        if mutation.op == .delete { return rows.isEmpty ? .missing : .written(nil) }
        guard let first = rows.first else { return .missing }
        return .written(OwnTableCopies.row(first))
    }
}
