import Foundation
import OutpostCore
import OutpostSQLite

/// Writes a first download's server copies into a table whose uuid index is
/// off (`FirstDownloadKeys`): new records are appended, 64 to a statement,
/// and their rowids noted; a record seen before in this download is updated
/// at its rowid. Nothing else writes the table meanwhile (any other write
/// makes the index first), so every row in it is a synced copy.
struct AppendedCopyWriter {
    private let connection: SQLiteConnection
    private let rows: AppendedRows
    private let single: SQLitePreparedStatement
    private let batch: SQLitePreparedStatement
    private let update: SQLitePreparedStatement
    private let collection: String
    private let delete: SQLitePreparedStatement

    /// `single`, `batch`: the writer's inserts of one record and of 64.
    init(
        _ connection: SQLiteConnection, _ collection: String, rows: AppendedRows, single: SQLitePreparedStatement,
        batch: SQLitePreparedStatement
    ) throws {
        self.connection = connection
        self.collection = collection
        self.rows = rows
        self.single = single
        self.batch = batch
        // ?1-?8 as the upsert binds them, ?9 the rowid.
        update = try connection.prepared(
            """
            UPDATE "\(collection)" SET server_id = ?2, sync_state = 'synced', server_updated_at = ?3, rejection_json = NULL,
                base_version = NULL, server_version = ?4, on_server = 1, deleted = 0, owner = ?5, team = ?6, data = ?7,
                device_time = ?8
            WHERE rowid = ?9 AND uuid = ?1 AND sync_state = 'synced' AND (server_version IS NULL OR server_version <= ?4)
            """)
        delete = try connection.prepared(
            "DELETE FROM \"\(collection)\" WHERE rowid = ?1 AND uuid = ?2 AND sync_state = 'synced'")
    }

    /// A run of a page's records in the order of their uuids (by their first
    /// 16 hex digits; records of equal keys, such as one record twice, keep
    /// their order). The rows are appended in that order, and SQLite's sort
    /// for the index at the download's end then merges sorted runs instead
    /// of sorting uuids that came in no order: building the index of
    /// 235,613 random uuids took about 40% less CPU (docs/benchmarks.md).
    static func inKeyOrder(_ records: ArraySlice<RawChange>, _ text: UnsafeBufferPointer<UInt8>) -> [RawChange] {
        var keyed = records.indices.map { index in
            (key: AppendedRows.PackedKey(text.span(records[index].uuid))?.high ?? 0, index: index)
        }
        keyed.sort { $0.key != $1.key ? $0.key < $1.key : $0.index < $1.index }
        return keyed.map { records[$0.index] }
    }

    /// How many records were written (new, or newer than the copy appended before).
    func write(_ records: ArraySlice<RawChange>, _ text: UnsafeBufferPointer<UInt8>, binding writer: SyncedCopyWriter) throws -> Int {
        var applied = 0
        var waiting: [RawChange] = []
        waiting.reserveCapacity(records.count)
        for record in records {
            let uuid = text.span(record.uuid)
            guard let seen = rows.claim(uuid, as: rows.lastRowid + Int64(waiting.count) + 1) else {
                waiting.append(record)
                continue
            }
            // Seen before in this download: what waits goes in first (its row may be among them).
            var rowid = seen
            if !waiting.isEmpty {
                applied += try append(waiting, text, writer)
                waiting.removeAll(keepingCapacity: true)
                rowid = rows.rowid(uuid) ?? seen
            }
            applied += try rewrite(record, at: rowid, text, writer)
        }
        applied += try append(waiting, text, writer)
        return applied
    }

    /// Inserts rows in one statement when there are 64. Their rowids were
    /// noted before (the last one's plus one each: a rowid table numbers
    /// appended rows so); a different number from SQLite is noted instead.
    private func append(_ records: [RawChange], _ text: UnsafeBufferPointer<UInt8>, _ writer: SyncedCopyWriter) throws -> Int {
        guard !records.isEmpty else { return 0 }
        if records.count == SyncedCopyWriter.batchSize {
            for (offset, record) in records.enumerated() {
                try writer.bind(record, text, to: batch, at: Int32(offset * SyncedCopyWriter.parametersPerRecord))
            }
            try batch.run()
            let first = connection.lastInsertRowID - Int64(records.count) + 1
            if first != rows.lastRowid + 1 {
                for (offset, record) in records.enumerated() { rows.set(text.span(record.uuid), first + Int64(offset)) }
            }
            rows.lastRowid = connection.lastInsertRowID
        } else {
            for record in records {
                try writer.bind(record, text, to: single, at: 0)
                try single.run()
                if connection.lastInsertRowID != rows.lastRowid + 1 { rows.set(text.span(record.uuid), connection.lastInsertRowID) }
                rows.lastRowid = connection.lastInsertRowID
            }
        }
        return records.count
    }

    /// A record appended before in this download: its row takes the newer
    /// version. A row no longer there (cleared meanwhile) is appended again.
    private func rewrite(_ record: RawChange, at rowid: Int64, _ text: UnsafeBufferPointer<UInt8>, _ writer: SyncedCopyWriter) throws -> Int {
        try writer.bind(record, text, to: update, at: 0)
        try update.bind(9, rowid)
        if try update.run() > 0 { return 1 }
        let present = try connection.first(
            "SELECT 1 FROM \"\(collection)\" WHERE rowid = ? AND uuid = ?",
            [.integer(rowid), .text(String(decoding: text.span(record.uuid), as: UTF8.self))]) { _ in true }
        if present == true { return 0 }
        let appended = try append([record], text, writer)
        rows.set(text.span(record.uuid), connection.lastInsertRowID)
        return appended
    }

    /// Deletes the record's appended row; false when there is none.
    func deleteSynced(_ uuid: UnsafeBufferPointer<UInt8>) throws -> Bool {
        guard let rowid = rows.rowid(uuid) else { return false }
        try delete.bind(1, rowid)
        try delete.bind(2, text: uuid)
        guard try delete.run() > 0 else { return false }
        rows.remove(uuid)
        return true
    }
}
