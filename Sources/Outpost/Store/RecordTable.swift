package import Foundation
import OutpostCore
package import OutpostSQLite

/// The table of one collection. `uuid` is made on the device and is the key
/// everywhere; `on_server` records that the server is known to hold the
/// record (a confirmed create or a pulled copy). Every collection's table
/// has the same control columns (`ControlColumn`), so one sync engine
/// serves every collection.
///
/// Which collections exist is the app's choice at each opening, so these
/// tables are made and brought up to date by `ensure`, not by a migration.
package struct RecordTable {
    let name: String
    let connection: SQLiteConnection

    package init(_ name: String, _ connection: SQLiteConnection) {
        self.name = name
        self.connection = connection
    }

    /// Control columns every collection table must have.
    static let controlColumns = Set(ControlColumn.allCases.map(\.name))

    /// Control columns added after the first release, with their type: a
    /// table made before gets them when the store opens.
    static let addedColumns = ControlColumn.allCases.filter(\.addedLater).map { (name: $0.name, type: $0.declaration) }

    /// A rowid table, its uuid in a unique index of its own (`uuidIndex`):
    /// rows are appended in the order they come, so a download whose uuids
    /// arrive in no key order (made elsewhere, UUIDv4) writes only small
    /// index entries at random places, not whole rows into pages all over
    /// the table, and a first download can leave the index out until its end.
    var definition: String {
        """
        CREATE TABLE IF NOT EXISTS "\(name)" (
            \(ControlColumn.definitions)
        );
        """
    }

    /// Only refused records are indexed (the status counts them after every
    /// sync): a local write leaves its record pending and so writes no
    /// index page.
    var rejectedIndex: String {
        "CREATE INDEX IF NOT EXISTS \"\(name)_rejected\" ON \"\(name)\" (sync_state) WHERE sync_state = 'rejected';"
    }

    /// Stores made before the rejected index had "_by_state", which took a
    /// page per write and served no query.
    var legacyStateIndex: String { "DROP INDEX IF EXISTS \"\(name)_by_state\";" }

    static func fieldIndexName(collection: String, field: String) -> String { "\(collection)_by_\(field)" }

    func fieldIndex(_ field: String) -> String {
        "CREATE INDEX IF NOT EXISTS \"\(name)_by_\(field)\" ON \"\(name)\" (json_extract(data, '$.\(field)'));"
    }

    func dropFieldIndex(_ field: String) -> String { "DROP INDEX IF EXISTS \"\(name)_by_\(field)\";" }

    /// Makes the table or brings one made by an earlier release up to date:
    /// added columns, the quick state check and the current shape (a table
    /// holding `IN (…)`, kept in uuid order or keyed by `PRIMARY KEY` is
    /// made again with every row), the uuid index (one a download cut off
    /// mid-way left out is made now), the rejected index, and an index per
    /// indexed field (none while payloads are sealed: an index over JSON
    /// fields cannot read sealed data and would keep the fields in clear).
    package func ensure(indexedFields: [String], sealed: Bool) throws {
        try connection.execute(definition)
        var columns = Set(try TableRebuild.columns(of: name, in: connection))
        for added in Self.addedColumns where !columns.contains(added.name) {
            try connection.execute("ALTER TABLE \"\(name)\" ADD COLUMN \(added.name) \(added.type)")
            columns.insert(added.name)
        }
        let missing = Self.controlColumns.subtracting(columns)
        guard missing.isEmpty else {
            throw StoreError.invalidRecord("table '\(name)' lacks the columns \(missing.sorted().joined(separator: ", "))")
        }
        if try TableRebuild.definition(of: name, contains: ControlColumn.syncStateCheck.legacyText, in: connection)
            || hasEarlierShape()
        {
            // Its indexes go with the old table; the uuid's is made after the
            // copy (sorted, in one go), the others below.
            try TableRebuild.rebuild(name, create: definition, indexes: [uuidIndex], in: connection)
        }
        try connection.execute(uuidIndex)
        try connection.execute(legacyStateIndex)
        try connection.execute(rejectedIndex)
        for field in indexedFields {
            try connection.execute(sealed ? dropFieldIndex(field) : fieldIndex(field))
        }
    }

    /// Records with a queued change that were "sending": only one with an
    /// outbox entry can be, so the outbox is looked at rather than the whole table.
    private var sendingCondition: String {
        "uuid IN (\(OutboxTable.queuedInCollection)) AND sync_state = 'sending'"
    }

    package func hasSending() throws -> Bool {
        try connection.first(
            "SELECT 1 FROM \"\(name)\" WHERE \(sendingCondition) LIMIT 1", [.text(name)], { _ in true }) ?? false
    }

    /// Nothing is in flight in a process that just opened the store.
    package func resetSending() throws {
        try ensureUuidIndex()
        try connection.run("UPDATE \"\(name)\" SET sync_state = 'pending' WHERE \(sendingCondition)", [.text(name)])
    }

    package func countRejected() throws -> Int {
        try connection.first("SELECT count(*) FROM \"\(name)\" WHERE sync_state = 'rejected'") { Int($0.int64(0)) } ?? 0
    }

    package func countLive() throws -> Int {
        try connection.first("SELECT count(*) FROM \"\(name)\" WHERE deleted = 0") { Int($0.int64(0)) } ?? 0
    }

    /// After a full re-download: synced rows the server did not send again go.
    package func removeSyncedNotSeen() throws {
        try ensureUuidIndex()
        try connection.run(
            """
            DELETE FROM "\(name)" WHERE sync_state = 'synced'
            AND uuid NOT IN (\(ResyncSeenTable.seenInCollection))
            """, [.text(name)])
    }

    /// Removes synced copies the server last changed before `cutoff`;
    /// returns how many. Server times are fixed-width RFC 3339 text in UTC:
    /// text order is time order.
    package func removeSynced(updatedBefore cutoff: String) throws -> Int {
        try ensureUuidIndex()
        return try connection.run(
            """
            DELETE FROM "\(name)"
            WHERE sync_state = 'synced' AND server_updated_at IS NOT NULL AND server_updated_at < ?
            """, [.text(cutoff)])
    }

    /// Removes a synced copy with nothing queued for it; returns how many rows went.
    func removeSyncedWithNothingQueued(_ uuid: UUID) throws -> Int {
        try ensureUuidIndex()
        return try connection.run(
            """
            DELETE FROM "\(name)" WHERE uuid = ? AND sync_state = 'synced'
            AND \(OutboxTable.nothingQueued(collection: "?", uuid: "?"))
            """, [.text(uuid.wireText), .text(name), .text(uuid.wireText)])
    }

    /// Records that should have something queued (pending, sending or
    /// deleted here): uuid, state and whether deleted.
    func forEachUnsettled(_ body: (_ uuid: String, _ state: String, _ deleted: Bool) throws -> Void) throws {
        try connection.forEach(
            "SELECT uuid, sync_state, deleted FROM \"\(name)\" WHERE sync_state IN ('pending', 'sending') OR deleted = 1"
        ) { row in try body(row.string(0), row.string(1), row.int64(2) != 0) }
    }

    /// Every row's key and a payload column (`data`) still in clear text.
    func clearPayloads() throws -> [(key: SQLiteValue, text: String)] {
        try connection.query("SELECT uuid, data FROM \"\(name)\" WHERE typeof(data) = 'text'") { ($0.value(0), $0.string(1)) }
    }

    func setPayload(_ key: SQLiteValue, _ value: SQLiteValue) throws {
        try ensureUuidIndex()
        try connection.run("UPDATE \"\(name)\" SET data = ? WHERE uuid = ?", [value, key])
    }

    /// The common confirmation, in one statement: the live row of a record
    /// with nothing else queued becomes the server's copy (`data`: stored as
    /// the payload codec wrote it). Returns false when nothing was written.
    func adoptConfirmedCopy(_ uuid: UUID, _ record: WireRecord, data: SQLiteValue) throws -> Bool {
        try ensureUuidIndex()
        let written = try connection.run(
            """
            UPDATE "\(name)" SET on_server = 1, server_id = ?1, server_version = ?2, server_updated_at = ?3,
                device_time = coalesce(?4, device_time), owner = ?5, team = ?6, data = ?7,
                sync_state = 'synced', base_version = NULL, rejection_json = NULL
            WHERE uuid = ?8 AND deleted = 0
                AND \(OutboxTable.nothingQueued(collection: "?9", uuid: "?8"))
            """,
            [
                .integer(record.id), .integer(record.version), .text(record.updatedAt.rawValue), .text(record.deviceTime?.rawValue),
                .text(record.owner), .text(record.team), data, .text(uuid.wireText), .text(name),
            ])
        return written == 1
    }

    /// Hides a record again and leaves it waiting for its delete (`uuid`: as stored).
    func hideAgain(_ uuid: String) throws {
        try ensureUuidIndex()
        try connection.run("UPDATE \"\(name)\" SET deleted = 1, sync_state = 'pending' WHERE uuid = ?", [.text(uuid)])
    }

    // MARK: Rows

    /// The row with this uuid, read by `map` from the `RecordRow` columns.
    func row<T>(_ uuid: UUID, _ map: (SQLiteRow) throws -> T) throws -> T? {
        try connection.first("SELECT \(RecordRow.columns) FROM \"\(name)\" WHERE uuid = ?", [.text(uuid.wireText)], map)
    }

    /// Every live row (not deleted here): what every query of records starts from.
    static func liveRowsQuery(_ collection: String) -> String {
        "SELECT \(RecordRow.columns) FROM \"\(collection)\" WHERE deleted = 0"
    }

    /// Every live row, read by `map`.
    func liveRows<T>(_ map: (SQLiteRow) throws -> T) throws -> [T] {
        try connection.query(Self.liveRowsQuery(name), [], map)
    }

    func contains(_ uuid: UUID) throws -> Bool {
        try connection.first("SELECT 1 FROM \"\(name)\" WHERE uuid = ?", [.text(uuid.wireText)]) { _ in true } ?? false
    }

    /// A whole row, `values` in `ControlColumn` order.
    func insert(_ values: [SQLiteValue]) throws {
        try ensureUuidIndex()
        try connection.run(
            """
            INSERT INTO "\(name)" (\(ControlColumn.selectList)) VALUES (\(ControlColumn.placeholders))
            """,
            values)
    }

    /// Every column of an existing row, `values` in `ControlColumn` order (the key first).
    func update(_ values: [SQLiteValue]) throws {
        try ensureUuidIndex()
        try connection.run(
            """
            UPDATE "\(name)" SET \(ControlColumn.assignments) WHERE uuid = ?1
            """,
            values)
    }

    func remove(_ uuid: UUID) throws {
        try ensureUuidIndex()
        try connection.run("DELETE FROM \"\(name)\" WHERE uuid = ?", [.text(uuid.wireText)])
    }

    package func setState(_ uuid: UUID, _ state: SyncState) throws {
        try ensureUuidIndex()
        try connection.run("UPDATE \"\(name)\" SET sync_state = ? WHERE uuid = ?", [.text(state.rawValue), .text(uuid.wireText)])
    }

    /// Sets the state of many records in one statement.
    package func setStates(_ uuids: [UUID], _ state: SyncState) throws {
        try ensureUuidIndex()
        let list = JSONWriter.text(.array(uuids.map { .string($0.wireText) }))
        try connection.run(RecordStateQueries.setStates(in: name), [.text(state.rawValue), .text(list)])
    }

    /// Sets the state only where it is still `expected`.
    func setState(_ uuid: UUID, _ state: SyncState, from expected: SyncState) throws {
        try ensureUuidIndex()
        try connection.run(
            "UPDATE \"\(name)\" SET sync_state = ? WHERE uuid = ? AND sync_state = ?",
            [.text(state.rawValue), .text(uuid.wireText), .text(expected.rawValue)])
    }

    /// Rows matching a compiled query (`RecordQuery.sql()`), read by `map`.
    func rows<T>(_ sql: String, _ arguments: [SQLiteValue], _ map: (SQLiteRow) throws -> T) throws -> [T] {
        try connection.query(sql, arguments, map)
    }
}

/// Statements on many records at once whose plans must look each record
/// up by its key (`StorePlanTests` reads them).
package enum RecordStateQueries {
    /// Sets `sync_state` (?1) of the records whose uuids ?2 lists as a JSON array.
    package static func setStates(in collection: String) -> String {
        "UPDATE \"\(collection)\" SET sync_state = ?1 WHERE uuid IN (SELECT value FROM json_each(?2))"
    }
}
