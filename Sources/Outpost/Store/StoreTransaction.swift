public import Foundation
public import OutpostCore
import OutpostSQLite

/// The writes of one `LocalStore.write` call. Every record change and its
/// outbox entry commit together or not at all.
///
/// Valid only inside the closure it is passed to.
public final class StoreTransaction {
    let connection: SQLiteConnection
    let outbox: Outbox
    let registry: CollectionRegistry
    let clock: any WallClock
    let ids: any IDGenerator
    /// Collections written, so observers of other collections are not woken.
    var touched: Set<String> = []
    /// Live records added (+) or removed (-) per collection, for `LiveCounts`.
    var liveDelta: [String: Int] = [:]
    /// The server's limits, once learnt: captures they would refuse are refused here.
    let captureLimits: CaptureLimits?
    let attachments: AttachmentQueue

    init(
        connection: SQLiteConnection, outbox: Outbox, registry: CollectionRegistry, clock: any WallClock,
        ids: any IDGenerator, captureLimits: CaptureLimits? = nil, attachments: AttachmentQueue
    ) {
        self.captureLimits = captureLimits
        self.attachments = attachments
        self.connection = connection
        self.outbox = outbox
        self.registry = registry
        self.clock = clock
        self.ids = ids
    }

    private var tables: RecordTables { outbox.tables }

    private func now() -> String { ServerTimestamp(clock.now()).rawValue }

    // MARK: Untyped records

    /// Creates a record and queues its upload. Returns its uuid (made on the device).
    @discardableResult
    public func create(in collection: String, _ data: JSONObject, uuid: UUID? = nil) throws -> UUID {
        let descriptor = try registry.descriptor(collection)
        let uuid = uuid ?? ids.next()
        let data = data.filter { !$0.value.isNull }
        let row = RecordRow(
            collection: collection, uuid: uuid, serverID: nil, syncState: .pending, serverUpdatedAt: nil,
            localUpdatedAt: now(), rejection: nil, baseVersion: nil, serverVersion: nil, onServer: false,
            deleted: false, owner: nil, team: nil, data: data, deviceTime: ServerTimestamp(clock.now()))
        // The record and its create carry the same text: written once.
        let text = try data.jsonText()
        try captureLimits?.check(data, text: text)
        try tables.insert(row, dataText: text)
        try outbox.enqueueCreate(
            RecordReference(collection: collection, uuid: uuid), data: data, dataText: text, references: descriptor.references)
        touched.insert(collection)
        liveDelta[collection, default: 0] += 1
        return uuid
    }

    /// Changes some fields of a record: each key of `patch` replaces the
    /// field, a key set to null clears it. A patch that changes nothing
    /// queues nothing.
    public func update(in collection: String, _ uuid: UUID, patch: JSONObject) throws {
        _ = try registry.descriptor(collection)
        try update(try liveRow(collection, uuid), patch: patch)
    }

    /// The stored row of a record that exists and is not deleted.
    private func liveRow(_ collection: String, _ uuid: UUID) throws -> RecordRow {
        guard let row = try tables.load(collection, uuid), !row.deleted else {
            throw StoreError.recordNotFound(collection: collection, uuid: uuid)
        }
        return row
    }

    private func update(_ loaded: RecordRow, patch: JSONObject) throws {
        var row = loaded
        let collection = row.collection
        let uuid = row.uuid
        let descriptor = try registry.descriptor(collection)
        let newData = row.data.applyingPatch(patch)
        // The record's new data and a create it folds into carry the same
        // text: written once.
        let newText = try newData.jsonText()
        try captureLimits?.check(newData, text: newText)
        let record = RecordReference(collection: collection, uuid: uuid)
        if row.syncState == .rejected {
            // The person is fixing a refused record: send all of it again.
            row.rejection = nil
            if try outbox.queuedRows(for: record).isEmpty {
                if row.onServer {
                    var fullPatch = newData
                    for key in row.data.keys where newData[key] == nil { fullPatch[key] = .null }
                    try outbox.enqueueUpdate(
                        record, patch: fullPatch, baseVersion: row.serverVersion, newData: newData,
                        references: descriptor.references)
                } else {
                    try outbox.enqueueCreate(record, data: newData, dataText: newText, references: descriptor.references)
                }
            }
        } else {
            let effective = newData.patch(from: row.data)
            guard !effective.isEmpty else { return }
            if row.baseVersion == nil { row.baseVersion = row.serverVersion }
            try outbox.enqueueUpdate(
                record, patch: effective, baseVersion: row.serverVersion, newData: newData, newDataText: newText,
                oldDataText: loaded.storedText, references: descriptor.references)
        }
        row.data = newData
        row.localUpdatedAt = now()
        row.deviceTime = ServerTimestamp(clock.now())
        if row.syncState != .sending { row.syncState = .pending }
        try tables.save(row, dataText: newText)
        touched.insert(collection)
    }

    /// Deletes a record. A record never sent is simply dropped; otherwise it
    /// is hidden at once and a server delete is queued.
    public func delete(in collection: String, _ uuid: UUID) throws {
        _ = try registry.descriptor(collection)
        guard var row = try tables.load(collection, uuid), !row.deleted else {
            throw StoreError.recordNotFound(collection: collection, uuid: uuid)
        }
        let record = RecordReference(collection: collection, uuid: uuid)
        touched.insert(collection)
        // Removed or hidden below: either way one live record fewer.
        liveDelta[collection, default: 0] -= 1
        let queued = try outbox.queuedRows(for: record)
        if !row.onServer && queued.isEmpty {
            // Refused create, never on the server: nothing to tell it.
            try tables.remove(collection, uuid)
            return
        }
        if try !outbox.enqueueDelete(record, baseVersion: row.serverVersion) {
            try tables.remove(collection, uuid)
            return
        }
        row.deleted = true
        row.rejection = nil
        row.localUpdatedAt = now()
        row.deviceTime = ServerTimestamp(clock.now())
        if row.syncState != .sending { row.syncState = .pending }
        try tables.save(row)
    }

    /// The record with this uuid, or nil when absent or deleted.
    public func get(in collection: String, _ uuid: UUID) throws -> JSONRecord? {
        _ = try registry.descriptor(collection)
        guard let row = try tables.load(collection, uuid), !row.deleted else { return nil }
        return row.localRecord(row.data)
    }

    /// Records matching a query, as this transaction sees them (its own
    /// writes so far included): read, decide and write in one transaction.
    public func query(_ query: RecordQuery) throws -> [JSONRecord] {
        _ = try registry.descriptor(query.collection)
        return try tables.query(query)
    }

    // MARK: Attachments

    /// Copies bytes into the store as an attachment and returns the value
    /// to put in a record's field. The bytes are hashed once, on the way in;
    /// the record written in this same transaction names them. If the
    /// transaction is undone, or the app ends before a record names them,
    /// the copy is cleared away at a later sync.
    public func attach(_ data: Data, contentType: String) throws -> AttachedFile {
        try attach(contentType: contentType) { try attachments.folder.store(data) }
    }

    /// Copies a file into the store as an attachment, read piece by piece;
    /// the content type is guessed from its extension when not given.
    public func attach(contentsOf file: URL, contentType: String? = nil) throws -> AttachedFile {
        try attach(contentType: contentType ?? AttachedFile.contentType(forExtension: file.pathExtension)) {
            try attachments.folder.store(contentsOf: file)
        }
    }

    private func attach(contentType: String, _ copy: () throws -> (sha: String, size: Int64)) throws -> AttachedFile {
        guard !contentType.isEmpty, contentType.utf8.count <= 255, !contentType.contains(where: \.isNewline) else {
            throw StoreError.attachmentUnreadable("a content type is 1 to 255 bytes on one line (got '\(contentType.prefix(40))')")
        }
        let (sha, size) = try copy()
        guard let attachment = AttachedFile(sha256: sha, size: size, contentType: contentType) else {
            throw StoreError.attachmentUnreadable("the copy produced no valid hash")
        }
        try attachments.attach(attachment, now: now())
        return attachment
    }

    // MARK: Typed records

    /// Creates a record of a registered `SyncRecord` type. Returns its uuid.
    @discardableResult
    public func create<T: SyncRecord>(_ value: T, uuid: UUID? = nil) throws -> UUID {
        try create(in: T.collection, try RecordCoding.object(from: value), uuid: uuid)
    }

    /// Edits a typed record in place; only the fields that changed are sent.
    public func update<T: SyncRecord>(_ type: T.Type, _ uuid: UUID, _ edit: (inout T) throws -> Void) throws {
        _ = try registry.descriptor(T.collection)
        let row = try liveRow(T.collection, uuid)
        var value = try RecordCoding.value(T.self, from: row.data)
        // Compare the type's own encoding before and after, so fields the type
        // does not know (added by a newer server) are never cleared.
        let before = try RecordCoding.object(from: value)
        try edit(&value)
        let after = try RecordCoding.object(from: value)
        try update(row, patch: after.patch(from: before))
    }

    /// Deletes a typed record. A record never sent is simply dropped; otherwise it is hidden at once and a server delete is queued.
    public func delete<T: SyncRecord>(_ type: T.Type, _ uuid: UUID) throws {
        try delete(in: T.collection, uuid)
    }

    /// Typed records matching a filter, in an order, as this transaction sees them.
    public func query<T: SyncRecord>(
        _ type: T.Type, where filter: FieldFilter<T>? = nil, orderBy order: [FieldOrder<T>] = [], limit: Int? = nil
    ) throws -> [LocalRecord<T>] {
        try query(RecordQuery(T.self, filter: filter, order: order, limit: limit)).map { record in
            try record.map { try RecordCoding.value(T.self, from: $0) }
        }
    }

    /// The typed record with this uuid, or nil when absent or deleted.
    public func get<T: SyncRecord>(_ type: T.Type, _ uuid: UUID) throws -> LocalRecord<T>? {

        guard let record = try get(in: T.collection, uuid) else { return nil }
        return try record.map { try RecordCoding.value(T.self, from: $0) }
    }
}

extension LocalRecord {
    /// The same record with its value transformed (e.g. decoded into a type).
    public func map<Other>(_ transform: (Value) throws -> Other) rethrows -> LocalRecord<Other> {
        LocalRecord<Other>(
            collection: collection, uuid: uuid, value: try transform(value), syncState: syncState, serverID: serverID,
            serverVersion: serverVersion, serverUpdatedAt: serverUpdatedAt, localUpdatedAt: localUpdatedAt,
            deviceTime: deviceTime, rejection: rejection, owner: owner, team: team)
    }
}
