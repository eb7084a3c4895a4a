import Foundation
import OutpostCore
import OutpostSQLite

/// Writes server copies of one collection's records from a raw pull page.
struct SyncedCopyWriter {
    /// Records per multi-row statement: one step instead of 64 (each step
    /// has its own fixed cost, which showed as a third of applying a page).
    static let batchSize = 64

    private let collection: String
    private let connection: SQLiteConnection
    private let payloads: PayloadCodec
    private let single: SQLitePreparedStatement
    private let batch: SQLitePreparedStatement
    private let deleteStatement: SQLitePreparedStatement
    private let noteServerHoldsStatement: SQLitePreparedStatement
    private let refusedCreateHeldStatement: SQLitePreparedStatement
    /// Set while a first download fills the table with no uuid index.
    private let appender: AppendedCopyWriter?

    /// Whether rows of the table can hold local changes (not while a first
    /// download fills it: any local write makes the uuid index first).
    var mayHoldLocalChanges: Bool { appender == nil }
    /// Whether the table is being filled with its uuid index off (`AppendedCopyWriter`).
    var appends: Bool { appender != nil }

    /// `appended`: the rows a first download appended to the table while its
    /// uuid index is off; without it, the index is made first if it is off.
    init(_ connection: SQLiteConnection, _ collection: String, payloads: PayloadCodec, appended: AppendedRows? = nil) throws {
        self.collection = collection
        self.connection = connection
        self.payloads = payloads
        if let appended {
            // No index for `ON CONFLICT (uuid)`: plain inserts.
            single = try connection.prepared(Self.insertSQL(collection, rows: 1))
            batch = try connection.prepared(Self.insertSQL(collection, rows: Self.batchSize))
            appender = try AppendedCopyWriter(connection, collection, rows: appended, single: single, batch: batch)
        } else {
            try RecordTable(collection, connection).ensureUuidIndex()
            single = try connection.prepared(Self.upsertSQL(collection, rows: 1))
            batch = try connection.prepared(Self.upsertSQL(collection, rows: Self.batchSize))
            appender = nil
        }
        deleteStatement = try connection.prepared(
            "DELETE FROM \"\(collection)\" WHERE uuid = ? AND sync_state = 'synced'")
        noteServerHoldsStatement = try connection.prepared(DoubtfulCreateTable.markUnsentCreateMayBeOnServer)
        refusedCreateHeldStatement = try connection.prepared(
            """
            UPDATE "\(collection)" SET on_server = 1, server_id = ?2, server_version = ?3, server_updated_at = ?4
            WHERE uuid = ?1 AND on_server = 0
                AND \(OutboxTable.nothingQueued(collection: "?5", uuid: "?1"))
            """)
    }

    /// A pulled server copy's value for each column: bound from the page
    /// (`?`), or what every server copy has.
    private static func pulledValue(_ column: ControlColumn) -> String {
        switch column {
        case .uuid, .serverID, .serverUpdatedAt, .serverVersion, .owner, .team, .data, .deviceTime: "?"
        case .syncState: "'\(SyncState.synced.rawValue)'"
        case .localUpdatedAt, .rejection, .baseVersion: "NULL"
        case .onServer: "1"
        case .deleted: "0"
        }
    }

    /// Server copies of `rows` records, as new rows.
    private static func insertSQL(_ collection: String, rows: Int) -> String {
        let row = "(" + ControlColumn.allCases.map { pulledValue($0) }.joined(separator: ", ") + ")"
        return """
            INSERT INTO "\(collection)" (\(ControlColumn.selectList))
            VALUES \(Array(repeating: row, count: rows).joined(separator: ", "))
            """
    }

    /// Insert, or overwrite a synced row holding an older version; a row
    /// with local changes waiting (or a newer version) is left alone.
    private static func upsertSQL(_ collection: String, rows: Int) -> String {
        // Built once per collection and size: a live page of one record
        // makes a writer, and building the 64-row text cost more than
        // writing the record.
        let key = "\(rows) \(collection)"
        if let known = upsertTexts.withLock({ $0[key] }) { return known }
        let text = buildUpsertSQL(collection, rows: rows)
        upsertTexts.withLock { $0[key] = text }
        return text
    }

    private static let upsertTexts = Locked<[String: String]>([:])

    private static func buildUpsertSQL(_ collection: String, rows: Int) -> String {
        """
            \(insertSQL(collection, rows: rows))
            ON CONFLICT (uuid) DO UPDATE SET server_id = excluded.server_id, sync_state = 'synced',
                server_updated_at = excluded.server_updated_at, rejection_json = NULL, base_version = NULL,
                server_version = excluded.server_version, on_server = 1, deleted = 0, owner = excluded.owner,
                team = excluded.team, data = excluded.data, device_time = excluded.device_time
            WHERE sync_state = 'synced' AND (server_version IS NULL OR server_version <= excluded.server_version)
            """
    }

    /// Writes records' server copies, their text bound straight from the
    /// page: how many were written, and how many were left alone because
    /// they have local changes waiting.
    func upsert(_ records: ArraySlice<RawChange>, _ text: UnsafeBufferPointer<UInt8>) throws
        -> (applied: Int, keptLocal: Int, unblocked: Int)
    {
        if let appender { return (try appender.write(records, text, binding: self), 0, 0) }
        guard records.count == Self.batchSize else {
            var outcome = (applied: 0, keptLocal: 0, unblocked: 0)
            for record in records {
                try bind(record, text, to: single, at: 0)
                if try single.run() > 0 {
                    outcome.applied += 1
                } else if try hasLocalChanges(text.span(record.uuid)) {
                    outcome.keptLocal += 1
                    if try noteServerHolds(record, text) { outcome.unblocked += 1 }
                }
            }
            return outcome
        }
        for (offset, record) in records.enumerated() { try bind(record, text, to: batch, at: Int32(offset * Self.parametersPerRecord)) }
        let written = try batch.run()
        if written == records.count { return (written, 0, 0) }
        // Some were left alone: a written row now holds exactly the page's version.
        var outcome = (applied: 0, keptLocal: 0, unblocked: 0)
        for record in records {
            switch try storedState(text.span(record.uuid)) {
            case (true, record.version): outcome.applied += 1
            case (false, _):
                outcome.keptLocal += 1
                if try noteServerHolds(record, text) { outcome.unblocked += 1 }
            default: break
            }
        }
        return outcome
    }

    /// The `?` of one record in `upsertSQL`.
    static let parametersPerRecord = 8

    func bind(
        _ record: RawChange, _ text: UnsafeBufferPointer<UInt8>, to statement: SQLitePreparedStatement, at offset: Int32
    ) throws {
        try statement.bind(offset + 1, text: text.span(record.uuid))
        try statement.bind(offset + 2, record.id)
        try statement.bind(offset + 3, text: text.span(record.updatedAt))
        try statement.bind(offset + 4, record.version)
        try statement.bind(offset + 5, text: text.span(record.owner))
        try statement.bind(offset + 6, text: text.span(record.team))
        if let cipher = payloads.cipher {
            // Sealed at rest: the one copy made of a record's text.
            try statement.bind(offset + 7, blob: try cipher.seal(record.data.map { Array(text.span($0)) } ?? Array("{}".utf8)))
        } else if let data = record.data {
            try statement.bind(offset + 7, text: text.span(data))
        } else {
            try statement.bind(offset + 7, "{}")
        }
        if let deviceTime = record.deviceTime {
            try statement.bind(offset + 8, text: text.span(deviceTime))
        } else {
            try statement.bindNull(offset + 8)
        }
    }

    /// The server sent a record this device keeps local changes of. Only
    /// another copy of this database can have sent a record this device
    /// holds as never on the server (the uuid was made here), so what the
    /// person does with it next must reach the server:
    /// - when the changes include a create it never sent, a local delete
    ///   must not simply cancel that create (`DoubtfulCreates.swift`);
    /// - when it is a create the server refused, with nothing queued (the
    ///   other copy fixed and sent it), the row stays as the person sees it
    ///   but now knows the server's copy: a delete is sent instead of
    ///   dropping the row here only (the server's copy, never pulled again,
    ///   would be lost to this device), an edit goes as an update of it,
    ///   and changes held behind it (a child's create) may go. True then.
    private func noteServerHolds(_ record: RawChange, _ text: UnsafeBufferPointer<UInt8>) throws -> Bool {
        let uuid = text.span(record.uuid)
        try noteServerHoldsStatement.bind(1, collection)
        try noteServerHoldsStatement.bind(2, text: uuid)
        try noteServerHoldsStatement.run()
        try refusedCreateHeldStatement.bind(1, text: uuid)
        try refusedCreateHeldStatement.bind(2, record.id)
        try refusedCreateHeldStatement.bind(3, record.version)
        try refusedCreateHeldStatement.bind(4, text: text.span(record.updatedAt))
        try refusedCreateHeldStatement.bind(5, collection)
        return try refusedCreateHeldStatement.run() > 0
    }

    private func hasLocalChanges(_ uuid: UnsafeBufferPointer<UInt8>) throws -> Bool {
        try storedState(uuid).synced == false
    }

    /// Whether the stored row is a synced copy, and its server version.
    private func storedState(_ uuid: UnsafeBufferPointer<UInt8>) throws -> (synced: Bool, version: Int64?) {
        let uuidText = String(decoding: uuid, as: UTF8.self)
        return try connection.first(
            "SELECT sync_state = 'synced', server_version FROM \"\(collection)\" WHERE uuid = ?", [.text(uuidText)]
        ) { ($0.int64(0) != 0, $0.optionalInt64(1)) } ?? (true, nil)
    }

    /// Deletes a synced copy (tombstone or removal); false when there was
    /// none or it has local changes waiting.
    func deleteSynced(_ uuid: UnsafeBufferPointer<UInt8>) throws -> Bool {
        if let appender { return try appender.deleteSynced(uuid) }
        try deleteStatement.bind(1, text: uuid)
        return try deleteStatement.run() > 0
    }
}
