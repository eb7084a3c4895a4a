import Foundation
public import OutpostCore
import OutpostSQLite

/// Where the device stands in the server's change feed.
public struct PullState: Sendable, Equatable {
    /// The server's cursor; nil before the first page (or during a full re-download from scratch).
    public var cursor: PullCursor?
    /// Set while a full re-download after 410 is under way.
    public var isResyncing: Bool
    /// Each collection's last complete pull, in server time.
    public var lastSyncedAt: [String: ServerTimestamp]
}

/// What applying one pull page did.
public struct PullPageResult: Sendable, Equatable {
    public var applied = 0
    public var deleted = 0
    public var removed = 0
    /// Changes not applied because the record has local changes waiting;
    /// they are settled by the push (conflict or success), never overwritten.
    public var keptLocal = 0
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

    /// The stored cursor and sync times. A cursor made for another set of
    /// collections (an app update registered a new one, or the scope mode
    /// changed) is not reused.
    public func pullState(collections: [String]) throws -> PullState {
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
    public func beginResync() throws {
        try checkOpen()
        try connection.transaction {
            try connection.run("DELETE FROM kv WHERE key = ?", [.text(Self.cursorKey)])
            try connection.run("DELETE FROM resync_seen")
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
    public func applyPull(_ page: PullResponse, collections: [String]) throws -> PullPageResult {
        try applyPull(try RawPullPage(page), collections: collections)
    }

    /// The same for a page read straight from its bytes: record text is
    /// bound to the statements from the page itself, never decoded (the
    /// initial-sync path; see `RawPullPage`).
    @discardableResult
    public func applyPull(_ page: RawPullPage, collections: [String]) throws -> PullPageResult {
        try checkOpen()
        var result = PullPageResult()
        var touched: Set<String> = []
        let registered = Set(registry.all.map(\.name))
        try connection.transaction {
            let resyncing = try kvValue(Self.resyncKey) == "1"
            let seen = resyncing ? try connection.prepared("INSERT OR IGNORE INTO resync_seen (collection, uuid) VALUES (?, ?)") : nil
            try page.withText { text in
                // Pages hold long runs of one collection: its statements are
                // looked up once per run, not once per record.
                var current: (collection: String, writer: SyncedCopyWriter?) = ("", nil)
                for change in page.changes {
                    if change.collection == "catalogs" {
                        if try applyCatalog(change, in: page) { result.applied += 1 } else { result.deleted += 1 }
                        touched.insert("catalogs")
                        continue
                    }
                    if change.collection != current.collection {
                        let known = registered.contains(change.collection)
                        current = (change.collection, known ? try SyncedCopyWriter(connection, change.collection) : nil)
                        if known { touched.insert(change.collection) }
                    }
                    guard let writer = current.writer else { continue }
                    let uuid = text.span(change.uuid)
                    if let seen {
                        try seen.bind(1, change.collection)
                        try seen.bind(2, text: uuid)
                        try seen.run()
                    }
                    if change.removed || change.deleted {
                        // Tombstones and removals never touch a row with local changes waiting.
                        if try writer.deleteSynced(uuid) {
                            if change.removed { result.removed += 1 } else { result.deleted += 1 }
                        } else if try outbox.tables.exists(change.collection, page.uuid(change)) {
                            result.keptLocal += 1
                        }
                        continue
                    }
                    if try writer.upsert(change, text) {
                        result.applied += 1
                    } else if try outbox.tables.hasLocalChanges(change.collection, page.uuid(change)) {
                        result.keptLocal += 1
                    }
                }
            }
            try setKV(Self.cursorKey, page.cursor.rawValue)
            try setKV(Self.collectionsKey, collections.sorted().joined(separator: ","))
            if !page.hasMore {
                if resyncing { try finishResync() }
                for collection in collections {
                    try setKV(Self.lastSyncPrefix + collection, page.serverTime.rawValue)
                }
            }
        }
        notify(touched)
        return result
    }

    /// After a full re-download: synced rows the server did not send again go.
    private func finishResync() throws {
        for descriptor in registry.all {
            try connection.run(
                """
                DELETE FROM "\(descriptor.name)" WHERE sync_state = 'synced'
                AND uuid NOT IN (SELECT uuid FROM resync_seen WHERE collection = ?)
                """, [.text(descriptor.name)])
        }
        try connection.run("DELETE FROM resync_seen")
        try connection.run("DELETE FROM kv WHERE key = ?", [.text(Self.resyncKey)])
    }

    /// Stores a catalog entry; false when the change removed one.
    private func applyCatalog(_ change: RawChange, in page: RawPullPage) throws -> Bool {
        let uuid = page.string(change.uuid)
        guard !change.deleted, let span = change.data, case let text = page.string(span), let data = try? JSONObject.parseObject(text)
        else {
            try connection.run("DELETE FROM catalogs WHERE uuid = ?", [.text(uuid)])
            return false
        }
        try connection.run(
            """
            INSERT INTO catalogs (uuid, catalog, code, name, data, server_id, server_version, server_updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (uuid) DO UPDATE SET catalog = excluded.catalog, code = excluded.code, name = excluded.name,
                data = excluded.data, server_id = excluded.server_id, server_version = excluded.server_version,
                server_updated_at = excluded.server_updated_at
            """,
            [
                .text(uuid), .text(data["catalog"]?.stringValue ?? ""), .text(data["code"]?.stringValue ?? ""),
                .text(data["name"]?.stringValue ?? ""), .text(text), .integer(change.id), .integer(change.version),
                .text(page.string(change.updatedAt)),
            ])
        return true
    }

    // MARK: kv

    /// A value the sync engine keeps with the data (scope mode, window start).
    public func metadata(_ key: String) throws -> String? {
        try checkOpen()
        return try kvValue("meta." + key)
    }

    public func setMetadata(_ key: String, _ value: String?) throws {
        try checkOpen()
        if let value {
            try setKV("meta." + key, value)
        } else {
            try connection.run("DELETE FROM kv WHERE key = ?", [.text("meta." + key)])
        }
    }

    func kvValue(_ key: String) throws -> String? {
        try connection.first("SELECT value FROM kv WHERE key = ?", [.text(key)]) { $0.string(0) }
    }

    func kvValues(prefix: String) throws -> [String: String] {
        var values: [String: String] = [:]
        try connection.forEach("SELECT key, value FROM kv WHERE key >= ? AND key < ?", [.text(prefix), .text(prefix + "\u{FFFF}")]) {
            values[$0.string(0)] = $0.string(1)
        }
        return values
    }

    func setKV(_ key: String, _ value: String) throws {
        try connection.run(
            "INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [.text(key), .text(value)])
    }

    /// Counts of local records per collection (coverage in the status).
    public func localCounts() throws -> [String: Int] {
        try checkOpen()
        var counts: [String: Int] = [:]
        for descriptor in registry.all {
            counts[descriptor.name] =
                try connection.first("SELECT count(*) FROM \"\(descriptor.name)\" WHERE deleted = 0") { Int($0.int64(0)) } ?? 0
        }
        counts["catalogs"] = try connection.first("SELECT count(*) FROM catalogs") { Int($0.int64(0)) } ?? 0
        return counts
    }
}

/// Writes server copies of one collection's records from a raw pull page.
struct SyncedCopyWriter {
    private let upsertStatement: SQLitePreparedStatement
    private let deleteStatement: SQLitePreparedStatement

    init(_ connection: SQLiteConnection, _ collection: String) throws {
        // Insert, or overwrite a synced row holding an older version; a row
        // with local changes waiting (or a newer version) is left alone.
        upsertStatement = try connection.prepared(
            """
            INSERT INTO "\(collection)" (uuid, server_id, sync_state, server_updated_at, local_updated_at,
                rejection_json, base_version, server_version, on_server, deleted, owner, team, data)
            VALUES (?, ?, 'synced', ?, NULL, NULL, NULL, ?, 1, 0, ?, ?, ?)
            ON CONFLICT (uuid) DO UPDATE SET server_id = excluded.server_id, sync_state = 'synced',
                server_updated_at = excluded.server_updated_at, rejection_json = NULL, base_version = NULL,
                server_version = excluded.server_version, on_server = 1, deleted = 0, owner = excluded.owner,
                team = excluded.team, data = excluded.data
            WHERE sync_state = 'synced' AND (server_version IS NULL OR server_version <= excluded.server_version)
            """)
        deleteStatement = try connection.prepared(
            "DELETE FROM \"\(collection)\" WHERE uuid = ? AND sync_state = 'synced'")
    }

    /// Writes a record's server copy, its text bound straight from the page;
    /// returns whether the row was written.
    func upsert(_ change: RawChange, _ text: UnsafeBufferPointer<UInt8>) throws -> Bool {
        try upsertStatement.bind(1, text: text.span(change.uuid))
        try upsertStatement.bind(2, change.id)
        try upsertStatement.bind(3, text: text.span(change.updatedAt))
        try upsertStatement.bind(4, change.version)
        try upsertStatement.bind(5, text: text.span(change.owner))
        try upsertStatement.bind(6, text: text.span(change.team))
        if let data = change.data {
            try upsertStatement.bind(7, text: text.span(data))
        } else {
            try upsertStatement.bind(7, "{}")
        }
        return try upsertStatement.run() > 0
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

extension RecordTables {
    func hasLocalChanges(_ collection: String, _ uuid: UUID) throws -> Bool {
        try connection.first(
            "SELECT 1 FROM \"\(collection)\" WHERE uuid = ? AND sync_state != 'synced'", [.text(uuid.wireText)]
        ) { _ in true } ?? false
    }
}

extension LocalStore {
    /// Caches records fetched online (search, opened records): stored as
    /// synced copies, never over a record with local changes waiting.
    public func cacheRemote(_ records: [WireRecord]) throws {
        try checkOpen()
        let registered = Set(registry.all.map(\.name))
        var touched: Set<String> = []
        let wanted = records.filter { registered.contains($0.collection) && !$0.deleted }
        let page = try RawPullPage(
            PullResponse(changes: wanted.map { .record($0) }, cursor: PullCursor(rawValue: ""), hasMore: false, serverTime: ServerTimestamp(Date())))
        try connection.transaction {
            try page.withText { text in
                for change in page.changes {
                    // The writer itself leaves rows with local changes waiting alone.
                    if try SyncedCopyWriter(connection, change.collection).upsert(change, text) { touched.insert(change.collection) }
                }
            }
        }
        notify(touched)
    }
}
