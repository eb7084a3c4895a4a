import Foundation
import OutpostCore
import OutpostSQLite

/// Where the device stands in the server's change feed.
package struct PullState: Sendable, Equatable {
    /// The server's cursor; nil before the first page (or during a full re-download from scratch).
    package var cursor: PullCursor?
    /// Set while a full re-download after 410 is under way.
    package var isResyncing: Bool
    /// Each collection's last complete pull, in server time.
    package var lastSyncedAt: [String: ServerTimestamp]
}

/// What applying one pull page did.
package struct PullPageResult: Sendable, Equatable {
    /// Server copies written to the device (new or changed records).
    package var applied = 0
    /// Whether rows were written or taken out (the counts may have moved).
    var changedRows: Bool { applied + deleted + removed > 0 }
    /// Records deleted on the device because the server sent a tombstone.
    package var deleted = 0
    /// Local copies dropped because the record left this user's scope (it was not deleted on the server).
    package var removed = 0
    /// Changes not applied because the record has local changes waiting;
    /// they are settled by the push (conflict or success), never overwritten.
    package var keptLocal = 0
    /// Records this device had deleted (their create cancelled) that the
    /// server sent back: hidden again, with a delete queued that still has
    /// to be pushed.
    package var redeleted = 0
    /// Creates this device holds as refused that the server turned out to
    /// hold (another copy of this database fixed and sent them): changes
    /// waiting on them can go now, so a push follows.
    package var unblocked = 0
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
        try applyPulls([page], collections: collections)
    }

    /// Applies consecutive pages of one pull in one transaction, with the
    /// last page's cursor: a first download whose uuids arrive in no key
    /// order rewrites most leaves of the uuid index at every commit, so
    /// fewer commits write far less. The pages are all here already: no
    /// transaction waits for the network.
    /// A first download that stopped before its last page (the network
    /// gone, the sync cut at a deadline, the engine stopped) builds the uuid
    /// indexes it put off: until it resumes, reads by uuid must not scan
    /// the table. The download then goes on the usual way, into the index.
    /// Its checkpoints, held while pages were to come, run in the pause.
    package func finishInterruptedDownload() throws {
        try checkOpen()
        guard !isReadOnly else { return }
        try translatingStorageErrors { try downloadCache.downloadEnded(on: connection) }
        guard firstDownload.isFilling else { return }
        let filled = try translatingStorageErrors { try connection.transaction { try firstDownload.finish(on: connection) } }
        liveCounts.learn(filled)
    }

    @discardableResult
    package func applyPulls(_ pages: [RawPullPage], collections: [String]) throws -> PullPageResult {
        try applyPulls(pages, collections: collections, readingFigures: false).result
    }

    /// The same; with `readingFigures`, the status's figures the pages moved
    /// are read last inside the transaction (see ``applyLivePage(_:collections:readingFigures:)``).
    private func applyPulls(_ pages: [RawPullPage], collections: [String], readingFigures: Bool) throws
        -> (result: PullPageResult, figures: StoreFigures?)
    {
        try checkOpen()
        guard let last = pages.last else { return (PullPageResult(), nil) }
        var result = PullPageResult()
        var figures: StoreFigures?
        var touched: Set<String> = []
        let registered = Set(registry.all.map(\.name))
        if isReadOnly { throw StoreError.readOnly }
        try translatingStorageErrors { try downloadCache.pageArrives(hasMore: last.hasMore, on: connection) }
        let downloadUnderWay = downloadCache.isUnderWay
        let collectionsText = collections.sorted().joined(separator: ",")
        // Live records of the tables a first download filled by itself, known without a COUNT.
        var filled: [String: Int] = [:]
        // What a small page did to each kept count, exactly.
        var exact: [String: Int]?
        do { try translatingStorageErrors { try connection.transaction(flush: .deferred) {
            let resyncing = try kvValue(Self.resyncKey) == "1"
            // Pages store only what the server holds, with their cursor: a
            // power loss takes the last ones together with it and they are
            // pulled again, so they commit without a flush (the next synced
            // commit, or the system's own write-back within seconds, flushes
            // them along). The page that ends a download of several pages,
            // a first download or a resync syncs, so the download is on the
            // disk when the sync returns.
            let storedCollections = try kvValue(Self.collectionsKey)
            let fromScratch = try storedCollections != collectionsText || kvValue(Self.cursorKey) == nil
            if !last.hasMore && (downloadUnderWay || resyncing || fromScratch) { connection.flushThisCommit() }
            let seen = resyncing ? try ResyncLedger(connection) : nil
            let appending = try firstDownload.begin(pages, registered: registered, hasMore: last.hasMore, on: connection)
            let counted = try PageCountDeltas(pages, registered: registered, appending: appending, known: liveCounts, liveRows: liveRows)
            for page in pages {
                try applyChanges(of: page, registered: registered, appending: appending, seen: seen, into: &result, touched: &touched)
            }
            if result.applied > 0, try outbox.hasCancelledDoubts() {
                for collection in touched where collection != "catalogs" {
                    let returned = try outbox.redeleteReturnedRecords(in: collection)
                    result.applied -= returned
                    result.keptLocal += returned
                    result.redeleted += returned
                }
            }
            // Local edits kept (their doubt noted), deletes queued again,
            // refused creates freed: what only this device holds is synced.
            if result.keptLocal + result.redeleted + result.unblocked > 0 { connection.flushThisCommit() }
            try setKV(Self.cursorKey, last.cursor.rawValue)
            if storedCollections != collectionsText { try setKV(Self.collectionsKey, collectionsText) }
            if !last.hasMore {
                // Sorted and built in one go, committed with the last page.
                filled = try firstDownload.finish(on: connection)
                if resyncing {
                    filled = [:]
                    try finishResync()
                    liveCounts.forget(registry.all.map(\.name))
                }
                for collection in collections {
                    try setKV(Self.lastSyncPrefix + collection, last.serverTime.rawValue)
                }
                let purged = try applyRetention(now: last.serverTime)
                liveCounts.forget(purged)
                for collection in purged { filled[collection] = nil }
                touched.formUnion(purged)
            }
            // Deletes queued again touch rows beyond the page's: counted anew.
            // A page that changed no row moves no count: nothing to look up.
            if result.changedRows, result.redeleted == 0 { exact = try counted?.deltas(liveRows: liveRows) }
            if readingFigures {
                if result.changedRows { settleCounts(touched, exact: exact) }
                figures = pageFigures()
            }
        } } } catch {
            // The rows it appended went back with the transaction, and so
            // did any count read inside it.
            firstDownload.forget()
            liveCounts.forget(touched)
            throw error
        }
        // The pages are committed: a cache left large must not fail them.
        if !last.hasMore { try? downloadCache.downloadEnded(on: connection) }
        // Counts read with the figures are the committed ones already.
        if !readingFigures, result.changedRows { settleCounts(touched, exact: exact) }
        liveCounts.learn(filled)
        notify(touched)
        return (result, figures)
    }

    /// The kept counts of the collections pages touched: moved by the
    /// exact change where the pages' records were counted before and after
    /// them, forgotten (counted again at the next read) elsewhere.
    private func settleCounts(_ touched: Set<String>, exact: [String: Int]?) {
        let exact = exact ?? [:]
        liveCounts.adjust(exact)
        liveCounts.forget(touched.subtracting(exact.keys))
    }

    /// Live rows of `uuids` in `collection` (the uuid index finds each:
    /// only a table a first download is filling is without it, and those
    /// are not counted this way).
    private func liveRows(_ collection: String, among uuids: Set<String>) throws -> Int {
        let sql = "SELECT count(*) FROM \"\(collection)\" WHERE uuid = ? AND deleted = 0"
        var rows = 0
        for uuid in uuids { rows += try connection.first(sql, [.text(uuid)]) { Int($0.int64(0)) } ?? 0 }
        return rows
    }

    /// Applies a live page (see ``applyPulls(_:collections:)``) and, with
    /// `readingFigures`, reads in the same call the status's figures a page
    /// moves: the counts and the sync times. The outbox, conflicts and
    /// attachments' figures are left out (nil): a page changes them only
    /// when it queued something, and a push then publishes them anyway.
    package func applyLivePage(_ page: RawPullPage, collections: [String], readingFigures: Bool) throws
        -> (PullPageResult, StoreFigures?)
    {
        // Read inside the page's own transaction, before its commit: a read
        // transaction of their own took SQLite's file locks again.
        try applyPulls([page], collections: collections, readingFigures: readingFigures)
    }

    /// The figures a page moves (its cursor and times, the counts, the
    /// scope), read inside the caller's transaction; `statusFigures` adds
    /// the outbox's, the conflicts' and the attachments' to them.
    func pageFigures() -> StoreFigures {
        StoreFigures(
            pullState: try? pullState(collections: syncedCollections), counts: try? localCounts(),
            mode: (try? metadata("scope.mode")).flatMap { $0.flatMap(ScopeMode.init(rawValue:)) },
            windowStart: (try? metadata("scope.window_start")).flatMap { $0.map(ServerTimestamp.init(rawValue:)) })
    }

    /// Prepares the statements a page of each collection runs (SQLite keeps
    /// them on the connection), while the live channel opens and nothing
    /// waits: the first change after it then does not pay for them (the
    /// 64-record upsert alone took a fair share of a first page's time).
    /// Not during a first download, whose writer is another.
    package func preparePageStatements() {
        guard !isClosed, !isReadOnly, !firstDownload.isFilling else { return }
        for descriptor in registry.all {
            _ = try? SyncedCopyWriter(connection, descriptor.name, payloads: tables.payloads)
        }
    }

    /// Writes one page's changes inside the caller's transaction.
    ///
    /// Records with local changes waiting (pending, sending or rejected) are
    /// never overwritten: the local edit stays visible and the push settles
    /// it. Tombstones delete, `removed` drops the local copy.
    /// `appending`: the collections a first download fills with their uuid
    /// index off, with the rows appended so far.
    private func applyChanges(
        of page: RawPullPage, registered: Set<String>, appending: [String: AppendedRows], seen: ResyncLedger?,
        into result: inout PullPageResult, touched: inout Set<String>
    ) throws {
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
                    current = (
                        change.collection,
                        known
                            ? try SyncedCopyWriter(
                                connection, change.collection, payloads: tables.payloads, appended: appending[change.collection])
                            : nil
                    )
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
                    } else if writer.mayHoldLocalChanges, try tables.exists(change.collection, page.uuid(change)) {
                        result.keptLocal += 1
                    }
                    index += 1
                    continue
                }
                // A table filled with its uuid index off takes the page's whole
                // run at once, in key order (see `AppendedCopyWriter.inKeyOrder`).
                let runLimit = writer.appends ? Int.max : SyncedCopyWriter.batchSize
                var end = index + 1
                while end < changes.count, end - index < runLimit, !changes[end].deleted,
                    !changes[end].removed, changes[end].collection == change.collection
                {
                    end += 1
                }
                for record in changes[index..<end] { try seen?.mark(record, text) }
                if writer.appends {
                    let run = AppendedCopyWriter.inKeyOrder(changes[index..<end], text)
                    var start = 0
                    while start < run.count {
                        let stop = min(start + SyncedCopyWriter.batchSize, run.count)
                        result.applied += try writer.upsert(run[start..<stop], text).applied
                        start = stop
                    }
                } else {
                    let outcome = try writer.upsert(changes[index..<end], text)
                    result.applied += outcome.applied
                    result.keptLocal += outcome.keptLocal
                    result.unblocked += outcome.unblocked
                }
                index = end
            }
        }
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
