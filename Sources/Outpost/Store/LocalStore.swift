public import Foundation
public import OutpostCore
public import OutpostSQLite

/// The device's database: records of every registered collection, the
/// durable outbox, and the client's identity (docs/architecture.md).
///
/// Open it locally and it works offline from the first line; sync is
/// connected separately. An actor: the one serial owner of its SQLite
/// connection, so writes from many tasks are serialised without locks. Its
/// work runs on a dispatch queue of its own, never on the cooperative
/// threads the app's tasks share: SQLite's waits for the disk hold that
/// queue's thread only.
///
/// ```swift
/// let store = try await LocalStore.open(path: dbPath, collections: [Person.descriptor, Visit.descriptor])
/// let id = try await store.create(Person(name: "Ana"))
/// try await store.update(Person.self, id) { $0.phone = "555" }
/// for try await people in await store.observe(Person.self) { render(people) }
/// ```
public actor LocalStore {
    /// The store's own serial queue (see `StoreExecutor`).
    package nonisolated let executor: StoreExecutor

    /// Where the store's work runs: its own queue, off the cooperative pool.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.unownedExecutor }

    /// The one connection. Every statement on it is written by the owner of
    /// its table (`OutboxTable`, `RecordTable`, `BlobTable`, `KeyValueTable`,
    /// …); the store orders the work over them.
    let connection: SQLiteConnection
    /// The store's named values (`kv`).
    var keyValues: KeyValueTable { KeyValueTable(connection: connection) }
    /// The collection tables: the records as this device holds them.
    let tables: RecordTables
    /// The queue of local changes, settled against those tables.
    let outbox: Outbox
    /// Attachments: their files, uploads and eviction.
    let attachments: AttachmentQueue
    /// Downloads the bytes of attachments not on the device: set by the
    /// sync engine connected to this store.
    package nonisolated let blobSource = Locked<BlobSource?>(nil)
    /// Bytes of attachment files kept on the device before synced ones are evicted.
    var attachmentBudget: Int64 = LocalStore.defaultAttachmentBudget
    let registry: CollectionRegistry
    let clock: any WallClock
    let ids: any IDGenerator
    var observers: [UUID: StoreObserver] = [:]
    var localChangeContinuations: [UUID: AsyncStream<Void>.Continuation] = [:]
    var isClosed = false
    /// Held while this process's push is on the wire (see `PushLock`).
    let pushLock: PushLock
    /// How long a statement waits for another process's lock.
    let busyTimeout: Duration
    /// Watches for commits of other processes while anyone observes.
    var otherProcesses = OtherProcessWatch()
    var liveCounts = LiveCounts()
    /// Raised while a download of many pages runs.
    var downloadCache = DownloadPageCache()
    /// Collections a download is filling with their uuid index off.
    var firstDownload = FirstDownloadKeys()
    /// The limits the server published last (kept across launches).
    var captureLimits: CaptureLimits?

    /// The device's client id, made once and kept for the life of the
    /// database (a ``wipe()`` starts a new one).
    public nonisolated var clientID: UUID { identity.current }
    let identity: Locked<UUID>
    /// The database file.
    public nonisolated let path: String
    /// Opened read-only because the database could not be written: every
    /// read works, every write throws ``StoreError/readOnly``.
    public nonisolated let isReadOnly: Bool

    /// Opens (creating if needed) the database at `path` with these collections.
    ///
    /// Nothing is in flight after opening: a push this process did not see
    /// answered is resent, with the same seq, by the next sync.
    ///
    /// On Apple platforms the files get `protection` (default: readable
    /// once the device was unlocked after boot, so background sync works).
    ///
    /// With a `cipher`, every payload written from then on — record fields,
    /// queued changes, conflict reports — is sealed at rest; queries
    /// over fields then run over the opened records instead of SQL.
    ///
    /// Opening writes nothing when nothing needs changing, so a full disk
    /// still shows every record; on a filesystem that cannot be written the
    /// store opens read-only (``isReadOnly``) and writes throw
    /// ``StoreError/readOnly``. A database that is missing or empty where a
    /// store existed throws ``StoreError/databaseLost(path:clientID:)``
    /// unless `ifDatabaseLost` is `.startOver`.
    ///
    /// When a write returns, it survives a power loss (`durability`
    /// `.powerLoss`, the default): the record, its queued change and its
    /// attachments' files are on stable storage. `.processCrash` keeps
    /// writes across an app crash only and lets the last ones go with a
    /// power loss, for data the app could make again; never for a person's
    /// captures.
    ///
    /// `busyTimeout` is how long a statement waits while another process
    /// (an app's widget or share extension on the same App Group file)
    /// holds the file's write lock, before failing with
    /// ``StoreError/busy(_:)``; 0 fails at once. It must lie between 0 and
    /// one hour.
    ///
    /// This initializer opens on the calling thread: migrations, a first
    /// cipher's sealing of every record and a checkpoint may take seconds.
    /// From the main thread (`App.init`, where iOS ends a launch that takes
    /// too long) use ``open(path:collections:clock:ids:protection:cipher:ifDatabaseLost:durability:busyTimeout:progress:)``,
    /// which does the same work on the store's own queue.
    public init(
        path: String, collections: [CollectionDescriptor], clock: any WallClock = SystemWallClock(),
        ids: any IDGenerator = UUIDv7Generator(), protection: FileProtection = .untilFirstUnlock,
        cipher: (any PayloadCipher)? = nil, ifDatabaseLost: LostDatabasePolicy = .refuse, durability: Durability = .powerLoss,
        busyTimeout: Duration = LocalStore.defaultBusyTimeout
    ) throws {
        try self.init(
            path: path, collections: collections, clock: clock, ids: ids, protection: protection, cipher: cipher,
            ifDatabaseLost: ifDatabaseLost, vfs: nil, lockWait: busyTimeout, durability: durability)
    }

    /// The same, through a named SQLite VFS (tests inject disk faults with one).
    package init(
        path: String, collections: [CollectionDescriptor], clock: any WallClock = SystemWallClock(),
        ids: any IDGenerator = UUIDv7Generator(), protection: FileProtection = .untilFirstUnlock,
        cipher: (any PayloadCipher)? = nil, ifDatabaseLost: LostDatabasePolicy = .refuse, vfs: String?,
        lockWait: Duration? = nil, durability: Durability = .powerLoss, executor: StoreExecutor? = nil,
        progress: (@Sendable (OpenProgress) -> Void)? = nil
    ) throws {
        let busyTimeout = lockWait ?? Self.defaultBusyTimeout
        let waitMilliseconds = try Self.milliseconds(busyTimeout: busyTimeout)
        let registry = try CollectionRegistry(collections)
        let marker = StoreMarker(databasePath: path)
        try marker.check(databasePath: path, policy: ifDatabaseLost)
        let payloads = PayloadCodec(cipher: cipher)
        var readOnly = false
        let connection: SQLiteConnection
        do {
            connection = try SQLiteConnection(
                path: path, protection: protection, vfs: vfs, durability: durability, busyTimeoutMilliseconds: waitMilliseconds)
        } catch let error as SQLiteError
            where [.readOnly, .cantOpen, .permission].contains(error.code) && FileManager.default.fileExists(atPath: path)
        {
            // The file is there but cannot be written (a read-only filesystem):
            // read what it holds rather than fail outright.
            connection = try translatingStorageErrors {
                try SQLiteConnection(
                    path: path, readOnly: true, immutable: true, protection: protection, vfs: vfs,
                    busyTimeoutMilliseconds: waitMilliseconds)
            }
            readOnly = true
        } catch let error as SQLiteError {
            // Opening itself could not write (a full disk switching to WAL).
            throw StoreError(storage: error) ?? error
        }
        // Records left "sending" are reset only when no other process's
        // push is on the wire: then a process that died left them.
        let pushLock = PushLock(databasePath: path)
        let noPushElsewhere = !readOnly && pushLock.tryAcquire()
        defer { pushLock.release() }
        let clientID: UUID = try translatingStorageErrors {
            if try StoreMigrator.needsWrite(
                connection, collections: registry.all, payloads: payloads, readOnly: readOnly, resettingSending: noPushElsewhere)
            {
                if readOnly { throw StoreError.readOnly }
                try StoreMigrator.migrate(
                    connection, collections: registry.all, payloads: payloads, resettingSending: noPushElsewhere, progress: progress)
            }
            return try StoreMigrator.clientID(connection, ids: ids)
        }
        if !readOnly {
            marker.record(clientID)
            // An app's writes come in bursts: the WAL is copied back into
            // the database file in the pauses, not inside one of the writes.
            connection.checkpointWhenIdle()
        }
        let limitsText = try? KeyValueTable(connection: connection).value(Self.limitsKey)
        self.captureLimits = (limitsText ?? nil).flatMap { try? WireCoding.decode(HealthResponse.Limits.self, from: Data($0.utf8)) }
            .map(CaptureLimits.init(limits:))
        self.isReadOnly = readOnly
        self.connection = connection
        self.tables = RecordTables(connection: connection, payloads: payloads)
        self.attachments = AttachmentQueue(
            connection: connection, folder: BlobFolder(databasePath: path, cipher: cipher, protection: protection), tables: tables,
            collections: registry.all.map(\.name))
        self.outbox = Outbox(connection: connection, tables: tables, attachments: attachments, ids: ids, clock: clock)
        let budgetText = try? KeyValueTable(connection: connection).value(Self.attachmentBudgetKey)
        if let budget = (budgetText ?? nil).flatMap({ Int64($0) }) { self.attachmentBudget = budget }
        self.registry = registry
        self.clock = clock
        self.ids = ids
        self.identity = Locked(clientID)
        self.path = path
        self.pushLock = pushLock
        self.busyTimeout = busyTimeout
        self.executor = executor ?? StoreExecutor()
    }

    /// Opens the database at a file URL.
    public init(
        url: URL, collections: [CollectionDescriptor], clock: any WallClock = SystemWallClock(),
        ids: any IDGenerator = UUIDv7Generator()
    ) throws {
        try self.init(path: url.path, collections: collections, clock: clock, ids: ids)
    }

    /// Closes the database; observations finish. Later calls throw ``StoreError/closed``.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        for observer in observers.values { observer.finish() }
        observers.removeAll()
        localChangeContinuations.values.forEach { $0.finish() }
        localChangeContinuations.removeAll()
        otherProcesses.stop()
        pushLock.release()
        connection.close()
    }

    /// Checkpoints run in pauses between writes so far, and how many failed
    /// (nil for a store opened read-only, whose file nobody writes).
    package var idleCheckpoints: (completed: Int, failed: Int, besideWrites: Int)? { connection.idleCheckpoints }

    func checkOpen() throws {
        if isClosed { throw StoreError.closed }
    }

    /// Lets other processes push once none of this one's pushes is on the wire.
    func releasePushLockIfIdle() {
        if outbox.leases.isEmpty { pushLock.release() }
    }

    // MARK: Writing

    /// Runs several writes in one transaction. Each record change and its
    /// outbox entry commit together; if `body` throws, nothing is kept.
    public func write<T: Sendable>(_ body: @Sendable (StoreTransaction) throws -> T) throws -> T {
        try checkOpen()
        if isReadOnly { throw StoreError.readOnly }
        let transaction = StoreTransaction(
            connection: connection, outbox: outbox, registry: registry, clock: clock, ids: ids, captureLimits: captureLimits,
            attachments: attachments)
        let result = try translatingStorageErrors { try connection.transaction { try body(transaction) } }
        liveCounts.adjust(transaction.liveDelta)
        notify(transaction.touched)
        if !transaction.touched.isEmpty { localChangeContinuations.values.forEach { $0.yield() } }
        return result
    }

    /// Creates a record; returns its uuid.
    @discardableResult
    public func create<T: SyncRecord>(_ value: T, uuid: UUID? = nil) throws -> UUID {
        try write { try $0.create(value, uuid: uuid) }
    }

    /// Creates an untyped record; returns its uuid.
    @discardableResult
    public func create(in collection: String, _ data: JSONObject, uuid: UUID? = nil) throws -> UUID {
        try write { try $0.create(in: collection, data, uuid: uuid) }
    }

    /// Edits a typed record; only changed fields are queued.
    public func update<T: SyncRecord>(_ type: T.Type, _ uuid: UUID, _ edit: @Sendable (inout T) throws -> Void) throws {
        try write { try $0.update(type, uuid, edit) }
    }

    /// Applies a partial patch (a null clears a field).
    public func update(in collection: String, _ uuid: UUID, patch: JSONObject) throws {
        try write { try $0.update(in: collection, uuid, patch: patch) }
    }

    /// Deletes a typed record. A record never sent is simply dropped; otherwise it is hidden at once and a server delete is queued.
    public func delete<T: SyncRecord>(_ type: T.Type, _ uuid: UUID) throws {
        try write { try $0.delete(type, uuid) }
    }

    /// Deletes an untyped record: dropped if never sent, otherwise hidden at once with a server delete queued.
    public func delete(in collection: String, _ uuid: UUID) throws {
        try write { try $0.delete(in: collection, uuid) }
    }

    // MARK: Reading

    /// The typed record with this uuid, or nil when absent or deleted.
    public func get<T: SyncRecord>(_ type: T.Type, _ uuid: UUID) throws -> LocalRecord<T>? {
        try checkOpen()
        guard let record = try get(in: T.collection, uuid) else { return nil }
        return try record.map { try RecordCoding.value(T.self, from: $0) }
    }

    /// The untyped record with this uuid, or nil when absent or deleted.
    public func get(in collection: String, _ uuid: UUID) throws -> JSONRecord? {
        try checkOpen()
        _ = try registry.descriptor(collection)
        guard let row = try tables.load(collection, uuid), !row.deleted else { return nil }
        return row.localRecord(row.data)
    }

    /// Records of a collection matching a query.
    public func query(_ query: RecordQuery) throws -> [JSONRecord] {
        try checkOpen()
        _ = try registry.descriptor(query.collection)
        return try tables.query(query)
    }

    /// Typed records matching a filter, in an order (see ``FieldFilter``).
    public func query<T: SyncRecord>(
        _ type: T.Type, where filter: FieldFilter<T>? = nil, orderBy order: [FieldOrder<T>] = [], limit: Int? = nil
    ) throws -> [LocalRecord<T>] {
        try query(RecordQuery(T.self, filter: filter, order: order, limit: limit)).map { record in
            try record.map { try RecordCoding.value(T.self, from: $0) }
        }
    }

    /// Entries of a read-only catalog, by code.
    public func catalog(_ name: String) throws -> [CatalogEntry] {
        try checkOpen()
        return try CatalogTable(connection: connection).entries(name)
    }

    // MARK: Outbox, for the sync engine

    /// The next push to send, with seqs written durably; nil while another
    /// push is in flight or when nothing can be sent.
    package func takePushBatch(limit: Int = PushRequest.maximumMutations, maxBytes: Int = .max) throws -> PushBatch? {
        try taking { waitingFor in
            try outbox.takeBatch(clientID: clientID, limit: limit, maxBytes: maxBytes, waitingFor: waitingFor)
        }
    }

    /// The push after `lease`, taken while `lease` is on the wire (see
    /// `Outbox.takeBatch(after:)`); nil when it cannot be taken ahead.
    package func takePushBatch(after lease: PushBatch, limit: Int, maxBytes: Int = .max) throws -> PushBatch? {
        try taking { waitingFor in
            try outbox.takeBatch(after: lease, clientID: clientID, limit: limit, maxBytes: maxBytes, waitingFor: waitingFor)
        }
    }

    private func taking(_ take: (_ waitingFor: Set<String>) throws -> PushBatch?) throws -> PushBatch? {
        try checkOpen()
        // One push on the wire across the processes sharing the file: an
        // extension's push waits for the app's to end (on this queue, not
        // on a cooperative thread), then finds its entries settled.
        if outbox.leases.isEmpty && !pushLock.acquire(waitingAtMost: busyTimeout) { return nil }
        defer { releasePushLockIfIdle() }
        guard
            let batch = try translatingStorageErrors({
                // A change naming an attachment the server does not hold yet waits for its upload.
                try take(try attachments.anyNotUploaded() ? try attachments.notUploaded() : [])
            })
        else { return nil }
        notify(Set(batch.entries.map(\.record.collection)))
        return batch
    }

    /// Gives back a push taken ahead that was never sent. Never throws: if
    /// writing fails, the lease still ends, and its entries keep the seqs no
    /// server saw and go as they are.
    package func giveBack(_ batch: PushBatch) {
        defer { releasePushLockIfIdle() }
        guard outbox.isLeased(batch) else { return }
        try? outbox.giveBack(batch)
        notify(Set(batch.entries.map(\.record.collection)))
    }

    /// Applies the server's per-mutation results of a push.
    package func settle(_ batch: PushBatch, with response: PushResponse) throws -> PushSettlement {
        defer { releasePushLockIfIdle() }
        try checkOpen()
        let touched = Set(batch.entries.map(\.record.collection))
        let settlement: PushSettlement
        do {
            settlement = try translatingStorageErrors { try outbox.settle(batch, with: response) }
        } catch {
            liveCounts.forget(touched)
            throw error
        }
        // Confirmed creates and edits leave every record where it was; a
        // confirmed delete drops its hidden row, and conflicts and rejections
        // may bring a record back or drop it.
        if !settlement.conflicts.isEmpty || !settlement.rejected.isEmpty || batch.entries.contains(where: { $0.op == .delete }) {
            liveCounts.forget(touched)
        }
        notify(touched)
        return settlement
    }

    /// Gives back a push that produced no results; its entries keep their seqs.
    package func release(_ batch: PushBatch, failure: PushFailure) throws {
        defer { releasePushLockIfIdle() }
        try checkOpen()
        try translatingStorageErrors { try outbox.release(batch, failure: failure) }
        notify(Set(batch.entries.map(\.record.collection)))
    }

    /// Ends a batch's lease on any path that did not settle it (a throw,
    /// a cancellation, an abandoned cycle). Never throws: if recording the
    /// attempt fails too, the batch still stops being in flight, and its
    /// entries, whose seqs are on disk, are resent as they are.
    package func endLease(_ batch: PushBatch, failure: PushFailure) {
        defer { releasePushLockIfIdle() }
        guard outbox.isLeased(batch) else { return }
        try? outbox.release(batch, failure: failure)
        outbox.dropLease(batch)
        notify(Set(batch.entries.map(\.record.collection)))
    }

    /// `409 client_behind`: gives the listed entries new seqs (see `Outbox.renumber`).
    package func renumber(_ batch: PushBatch, seqs: [Int64], serverLastSeq: Int64) throws -> Int {
        defer { releasePushLockIfIdle() }
        try checkOpen()
        return try translatingStorageErrors { try outbox.renumber(batch, seqs: seqs, serverLastSeq: serverLastSeq) }
    }

    static let limitsKey = "server.limits"

    /// The push limits the server published, if it ever did.
    package var serverLimits: HealthResponse.Limits? { captureLimits?.limits }

    /// Keeps the server's published limits: batches are sized under them and
    /// captures they would refuse are refused at once, with the reason.
    package func learnServerLimits(_ limits: HealthResponse.Limits) throws {
        guard captureLimits?.limits != limits else { return }
        captureLimits = CaptureLimits(limits: limits)
        guard !isReadOnly else { return }
        let text = String(decoding: try WireCoding.encode(limits), as: UTF8.self)
        try translatingStorageErrors {
            try keyValues.set(Self.limitsKey, text)
        }
    }

    /// Entries the server refused (whole requests) `budget` times or more.
    package func entriesWithSpentBudget(_ budget: Int) throws -> [OutboxEntry] {
        try checkOpen()
        return try outbox.rows(where: OutboxStatusQueries.spentBudget, [.integer(Int64(max(1, budget)))]).map { $0.entryValue() }
    }

    /// Makes entries the server will never take `rejected`, visibly (see `Outbox.rejectLocally`).
    package func rejectLocally(_ entries: [OutboxEntry], code: String, message: String) throws -> [RejectedChange] {
        try checkOpen()
        let touched = Set(entries.map(\.record.collection))
        liveCounts.forget(touched)
        defer { notify(touched) }
        return try translatingStorageErrors { try outbox.rejectLocally(entries, code: code, message: message) }
    }

    /// Rows readers met that could not be read, each a
    /// ``StoreError/damagedRow(table:key:problem:)``: lists and queries step
    /// over them instead of failing whole, and a damaged queued change is
    /// taken out of the queue at the next sync (its record shows as rejected).
    public func damagedRows() -> [StoreError] { tables.damage.all }

    /// The batch this process is waiting on, if any (memory only).
    package var inFlightBatch: PushBatch? { outbox.inFlight }

    /// Every queued entry, in order.
    package func outboxEntries() throws -> [OutboxEntry] {
        try checkOpen()
        return try outbox.entries()
    }

    /// What requests tell the server of the outbox: its changes, and how
    /// old the first is by this store's clock (two reads by index).
    func outboxReport() throws -> OutboxReport {
        try checkOpen()
        let oldest = try outbox.table.headQueuedAt().flatMap { ServerTimestamp(rawValue: $0).date }
        return OutboxReport(unsent: try outbox.table.count(), oldestSeconds: oldest.map { Int(clock.now().timeIntervalSince($0)) })
    }

    /// Counts of waiting, sending, unconfirmed, held and refused changes, for a status line.
    public func outboxSummary() throws -> OutboxSummary {
        try checkOpen()
        var summary = try outbox.summary()
        for descriptor in registry.all {
            summary.rejected += try RecordTable(descriptor.name, connection).countRejected()
        }
        return summary
    }

    /// Children held because their parent's create was refused.
    public func heldEntries() throws -> [HeldEntry] {
        try checkOpen()
        return try outbox.heldEntries()
    }

    /// The highest seq this client ever handed out.
    package func lastSeq() throws -> Int64 {
        try checkOpen()
        return try outbox.lastSeq()
    }

    /// Records whose last change the server refused, across collections.
    public func rejectedRecords() throws -> [JSONRecord] {
        try checkOpen()
        return try registry.all.flatMap { descriptor in
            try tables.query(RecordQuery(descriptor.name, filter: .syncState(.rejected)))
        }
    }

    // MARK: Conflicts

    /// Edits that lost to a newer server copy, oldest first.
    public func conflicts() throws -> [ConflictReport] {
        try checkOpen()
        return try ConflictLog(connection: connection, payloads: tables.payloads).all()
    }

    /// Settles a conflict field by field: for each field in `mine`, the
    /// person's own value from the edit that lost is written again over the
    /// copy that prevailed (queued like any edit, based on that copy); every
    /// other field keeps the server's value. Then the report is dismissed.
    /// With an empty `mine` the server's copy is kept whole.
    public func resolveConflict(_ id: Int64, keepingMine mine: Set<String>) throws {
        try checkOpen()
        let log = ConflictLog(connection: connection, payloads: tables.payloads)
        guard let report = try log.report(id) else {
            throw StoreError.invalidRecord("There is no conflict report \(id).")
        }
        var patch: JSONObject = [:]
        if !mine.isEmpty {
            guard let change = report.localChange else {
                throw StoreError.invalidRecord("The edit that lost was a delete: it has no fields to keep.")
            }
            let absent = mine.subtracting(change.keys)
            guard absent.isEmpty else {
                throw StoreError.invalidRecord(
                    "The edit that lost did not set \(absent.sorted().joined(separator: ", ")).")
            }
            patch = change.filter { mine.contains($0.key) }
        }
        // The kept values and the report's removal commit together.
        let record = report.record
        try write { [patch] transaction in
            if !patch.isEmpty { try transaction.update(in: record.collection, record.uuid, patch: patch) }
            try ConflictLog.remove(id, in: transaction.connection)
        }
        notify([StoreObserver.conflictsKey])
    }

    /// Forgets a conflict report once the person has seen it.
    public func dismissConflict(_ id: Int64) throws {
        try checkOpen()
        try ConflictLog(connection: connection, payloads: tables.payloads).remove(id)
        notify([StoreObserver.conflictsKey])
    }
}

/// One entry of a read-only catalog.
public struct CatalogEntry: Sendable, Equatable {
    /// The entry's record uuid.
    public var uuid: UUID
    /// The catalog the entry belongs to; every catalog shares the `catalogs` collection.
    public var catalog: String
    /// The entry's code within its catalog.
    public var code: String
    /// The entry's name, for display.
    public var name: String
    /// All of the entry's fields, as the server sent them.
    public var data: JSONObject
}
