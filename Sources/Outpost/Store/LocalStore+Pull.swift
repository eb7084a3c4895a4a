import Foundation
import OutpostCore
import OutpostSQLite

/// Where the device stands in the server's change feed.
package struct PullState: Sendable, Equatable {
    /// The server's cursor; nil before the first page (or during a full re-download from scratch).
    public var cursor: PullCursor?
    /// Set while a full re-download after 410 is under way.
    public var isResyncing: Bool
    /// Each collection's last complete pull, in server time.
    public var lastSyncedAt: [String: ServerTimestamp]
}

/// What applying one pull page did.
public struct PullPageResult: Sendable, Equatable {
    /// Server copies written to the device (new or changed records).
    public var applied = 0
    /// Records deleted on the device because the server sent a tombstone.
    public var deleted = 0
    /// Local copies dropped because the record left this user's scope (it was not deleted on the server).
    public var removed = 0
    /// Changes not applied because the record has local changes waiting;
    /// they are settled by the push (conflict or success), never overwritten.
    public var keptLocal = 0
    /// Records this device had deleted (their create cancelled) that the
    /// server sent back: hidden again, with a delete queued that still has
    /// to be pushed.
    public var redeleted = 0
    /// Creates this device holds as refused that the server turned out to
    /// hold (another copy of this database fixed and sent them): changes
    /// waiting on them can go now, so a push follows.
    public var unblocked = 0
}

extension LocalStore {
    static let cursorKey = "pull.cursor"
    static let collectionsKey = "pull.collections"
    static let resyncKey = "pull.resync"
    static let lastSyncPrefix = "pull.last_synced."

    /// Every collection the device can hold: the registered ones, plus catalogs.
    public nonisolated var syncedCollections: [String] {
        (registry.all.map(\.name) + ["catalogs"]).sorted()
    }

    /// What a pull may say this store holds of its own writes (the seq
    /// through which it holds every answer, `Outbox.ownAnswersHeld`), or
    /// nil while a resync downloads everything again: rows that download
    /// does not bring are deleted, so it must bring them all.
    package func ownAnswersHeld() throws -> Int64? {
        try checkOpen()
        if try kvValue(Self.resyncKey) == "1" { return nil }
        return try translatingStorageErrors { try outbox.ownAnswersHeld() }
    }

    /// The stored cursor and sync times. A cursor made for another set of
    /// collections (an app update registered a new one, or the scope mode
    /// changed) is not reused.
    package func pullState(collections: [String]) throws -> PullState {
        try checkOpen()
        let values = try kvValues(prefix: "pull.")
        let sameCollections = values[Self.collectionsKey] == collections.sorted().joined(separator: ",")
        var last: [String: ServerTimestamp] = [:]
        for (key, value) in values where key.hasPrefix(Self.lastSyncPrefix) {
            last[String(key.dropFirst(Self.lastSyncPrefix.count))] = ServerTimestamp(rawValue: value)
        }
        return PullState(
            cursor: sameCollections ? values[Self.cursorKey].map(PullCursor.init(rawValue:)) : nil,
            isResyncing: values[Self.resyncKey] == "1", lastSyncedAt: last)
    }

    /// Starts a full re-download (the server answered 410): the cursor is
    /// dropped; the outbox and every record with pending changes are kept;
    /// synced records not downloaded again are removed when it completes.
    package func beginResync() throws {
        try checkOpen()
        try connection.transaction {
            try keyValues.remove(Self.cursorKey)
            try ResyncSeenTable(connection: connection).removeAll()
            try setKV(Self.resyncKey, "1")
        }
    }

    /// Applies one page of `GET /v1/pull` and stores its cursor, in one
    /// transaction: the cursor never runs ahead of the data (I6).
    ///
    /// Records with local changes waiting (pending, sending or rejected) are
    /// never overwritten: the local edit stays visible and the push settles
    /// it. Tombstones delete, `removed` drops the local copy.
    @discardableResult
    package func applyPull(_ page: PullResponse, collections: [String]) throws -> PullPageResult {
        try applyPull(try RawPullPage(page), collections: collections)
    }

    /// The same for a page read straight from its bytes: record text is
    /// bound to the statements from the page itself, never decoded (the
    /// initial-sync path; see `RawPullPage`).
    @discardableResult
    package func applyPull(_ page: RawPullPage, collections: [String]) throws -> PullPageResult {
        try checkOpen()
        var result = PullPageResult()
        var touched: Set<String> = []
        let registered = Set(registry.all.map(\.name))
        if isReadOnly { throw StoreError.readOnly }
        try translatingStorageErrors { try connection.transaction {
            let resyncing = try kvValue(Self.resyncKey) == "1"
            let seen = resyncing ? try ResyncLedger(connection) : nil
            try page.withText { text in
                // Pages hold long runs of one collection: its statements are
                // looked up once per run, and its records go in as multi-row
                // statements.
                var current: (collection: String, writer: SyncedCopyWriter?) = ("", nil)
                let changes = page.changes
                var index = 0
                while index < changes.count {
                    let change = changes[index]
                    if change.collection == "catalogs" {
                        if try applyCatalog(change, in: page) { result.applied += 1 } else { result.deleted += 1 }
                        touched.insert("catalogs")
                        index += 1
                        continue
                    }
                    if change.collection != current.collection {
                        let known = registered.contains(change.collection)
                        current = (change.collection, known ? try SyncedCopyWriter(connection, change.collection, payloads: tables.payloads) : nil)
                        if known { touched.insert(change.collection) }
                    }
                    guard let writer = current.writer else {
                        index += 1
                        continue
                    }
                    if change.removed || change.deleted {
                        try seen?.mark(change, text)
                        // Tombstones and removals never touch a row with local changes waiting.
                        if try writer.deleteSynced(text.span(change.uuid)) {
                            if change.removed { result.removed += 1 } else { result.deleted += 1 }
                        } else if try tables.exists(change.collection, page.uuid(change)) {
                            result.keptLocal += 1
                        }
                        index += 1
                        continue
                    }
                    var end = index + 1
                    while end < changes.count, end - index < SyncedCopyWriter.batchSize, !changes[end].deleted,
                        !changes[end].removed, changes[end].collection == change.collection
                    {
                        end += 1
                    }
                    for record in changes[index..<end] { try seen?.mark(record, text) }
                    let outcome = try writer.upsert(changes[index..<end], text)
                    result.applied += outcome.applied
                    result.keptLocal += outcome.keptLocal
                    result.unblocked += outcome.unblocked
                    index = end
                }
            }
            if result.applied > 0, try outbox.hasCancelledDoubts() {
                for collection in touched where collection != "catalogs" {
                    let returned = try outbox.redeleteReturnedRecords(in: collection)
                    result.applied -= returned
                    result.keptLocal += returned
                    result.redeleted += returned
                }
            }
            try setKV(Self.cursorKey, page.cursor.rawValue)
            try setKV(Self.collectionsKey, collections.sorted().joined(separator: ","))
            if !page.hasMore {
                if resyncing {
                    try finishResync()
                    liveCounts.forget(registry.all.map(\.name))
                }
                for collection in collections {
                    try setKV(Self.lastSyncPrefix + collection, page.serverTime.rawValue)
                }
                let purged = try applyRetention(now: page.serverTime)
                liveCounts.forget(purged)
                touched.formUnion(purged)
            }
        } }
        if result.applied + result.deleted + result.removed > 0 { liveCounts.forget(touched) }
        notify(touched)
        return result
    }

    /// After a full re-download: synced rows the server did not send again go.
    private func finishResync() throws {
        let seen = ResyncSeenTable(connection: connection)
        for descriptor in registry.all {
            try RecordTable(descriptor.name, connection).removeSyncedNotSeen()
        }
        try seen.removeAll()
        try keyValues.remove(Self.resyncKey)
    }

    /// Stores a catalog entry; false when the change removed one.
    private func applyCatalog(_ change: RawChange, in page: RawPullPage) throws -> Bool {
        let uuid = page.string(change.uuid)
        guard !change.deleted, let span = change.data, case let text = page.string(span), let data = try? JSONObject.parseObject(text)
        else {
            try CatalogTable(connection: connection).remove(uuid: uuid)
            return false
        }
        try CatalogTable(connection: connection).upsert(
            uuid: uuid, data: data, text: text, serverID: change.id, version: change.version,
            updatedAt: page.string(change.updatedAt))
        return true
    }

    // MARK: kv

    /// A value the sync engine keeps with the data (scope mode, window start).
    package func metadata(_ key: String) throws -> String? {
        try checkOpen()
        return try kvValue("meta." + key)
    }

    package func setMetadata(_ key: String, _ value: String?) throws {
        try checkOpen()
        if let value {
            try setKV("meta." + key, value)
        } else {
            try keyValues.remove("meta." + key)
        }
    }

    /// The store's named values (`kv`).
    var keyValues: KeyValueTable { KeyValueTable(connection: connection) }

    func kvValue(_ key: String) throws -> String? { try keyValues.value(key) }

    func kvValues(prefix: String) throws -> [String: String] { try keyValues.values(prefix: prefix) }

    func setKV(_ key: String, _ value: String) throws { try keyValues.set(key, value) }

    /// Counts of local records per collection (coverage in the status).
    public func localCounts() throws -> [String: Int] {
        try checkOpen()
        var counts: [String: Int] = [:]
        for descriptor in registry.all {
            counts[descriptor.name] = try liveCounts.value(descriptor.name) {
                try RecordTable(descriptor.name, connection).countLive()
            }
        }
        counts["catalogs"] = try liveCounts.value("catalogs") {
            try CatalogTable(connection: connection).count()
        }
        return counts
    }
}

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

    init(_ connection: SQLiteConnection, _ collection: String, payloads: PayloadCodec) throws {
        self.collection = collection
        self.connection = connection
        self.payloads = payloads
        single = try connection.prepared(Self.upsertSQL(collection, rows: 1))
        batch = try connection.prepared(Self.upsertSQL(collection, rows: Self.batchSize))
        deleteStatement = try connection.prepared(
            "DELETE FROM \"\(collection)\" WHERE uuid = ? AND sync_state = 'synced'")
        noteServerHoldsStatement = try connection.prepared(
            """
            INSERT INTO doubtful_creates (collection, record_uuid, cancelled_after_seq)
            SELECT collection, record_uuid, NULL FROM outbox
            WHERE collection = ?1 AND record_uuid = ?2 AND op = 'create' AND seq IS NULL LIMIT 1
            ON CONFLICT (collection, record_uuid) DO UPDATE SET cancelled_after_seq = NULL
            """)
        refusedCreateHeldStatement = try connection.prepared(
            """
            UPDATE "\(collection)" SET on_server = 1, server_id = ?2, server_version = ?3, server_updated_at = ?4
            WHERE uuid = ?1 AND on_server = 0
                AND NOT EXISTS (SELECT 1 FROM outbox WHERE collection = ?5 AND record_uuid = ?1)
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

    /// Insert, or overwrite a synced row holding an older version; a row
    /// with local changes waiting (or a newer version) is left alone.
    private static func upsertSQL(_ collection: String, rows: Int) -> String {
        let row = "(" + ControlColumn.allCases.map { pulledValue($0) }.joined(separator: ", ") + ")"
        return """
            INSERT INTO "\(collection)" (\(ControlColumn.selectList))
            VALUES \(Array(repeating: row, count: rows).joined(separator: ", "))
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
    private static let parametersPerRecord = 8

    private func bind(
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
        try deleteStatement.bind(1, text: uuid)
        return try deleteStatement.run() > 0
    }
}

extension UnsafeBufferPointer<UInt8> {
    /// The bytes of a span of a raw pull page's text.
    func span(_ span: TextSpan) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: self[span.range])
    }
}

extension LocalStore {
    /// Caches records fetched online (search, opened records): stored as
    /// synced copies, never over a record with local changes waiting.
    /// The server's current copy of records this device confirmed from a
    /// `duplicate`'s original: stored when newer and nothing is waiting
    /// locally; a record gone from the server (deleted, or out of scope)
    /// leaves the device unless local changes are waiting.
    package func refreshFromServer(_ record: WireRecord?, _ reference: RecordReference) throws {
        try checkOpen()
        guard let record, !record.deleted else {
            _ = try translatingStorageErrors {
                try RecordTable(reference.collection, connection).removeSyncedWithNothingQueued(reference.uuid)
            }
            liveCounts.forget([reference.collection])
            notify([reference.collection])
            return
        }
        try translatingStorageErrors { try cacheRemote([record]) }
    }

    package func cacheRemote(_ records: [WireRecord]) throws {
        try checkOpen()
        let registered = Set(registry.all.map(\.name))
        var touched: Set<String> = []
        let wanted = records.filter { registered.contains($0.collection) && !$0.deleted }
        let page = try RawPullPage(
            PullResponse(changes: wanted.map { .record($0) }, cursor: PullCursor(rawValue: ""), hasMore: false, serverTime: ServerTimestamp(Date())))
        try connection.transaction {
            try page.withText { text in
                for index in page.changes.indices {
                    let collection = page.changes[index].collection
                    // The writer itself leaves rows with local changes waiting alone.
                    if try SyncedCopyWriter(connection, collection, payloads: tables.payloads).upsert(page.changes[index...index], text).applied > 0 {
                        touched.insert(collection)
                    }
                }
            }
        }
        liveCounts.forget(touched)
        notify(touched)
    }
}
