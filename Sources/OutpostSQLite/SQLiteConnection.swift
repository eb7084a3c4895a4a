import Foundation
#if canImport(SQLite3)
import SQLite3
#else
import CSQLite
#endif

/// One SQLite connection through the C API.
///
/// Not Sendable on purpose: exactly one serial owner (the `LocalStore` actor)
/// holds it, so no two threads ever use the handle at once. Prepared
/// statements are cached by SQL text for the connection's lifetime.
public final class SQLiteConnection {
    let handle: OpaquePointer
    public let path: String
    private var statements: [String: SQLiteStatement] = [:]
    /// The same statements by where their text's bytes lie. The texts run
    /// again and again are literals or strings kept for the purpose, at one
    /// place: found there, a text is not hashed and compared byte by byte
    /// (a page's multi-row upsert is kilobytes long). An entry holds its
    /// text, so no other text can lie at that place meanwhile.
    private var statementsByAddress: [UnsafeRawPointer: (sql: String, statement: SQLiteStatement)] = [:]
    private var isClosed = false
    /// How the file was opened (a checkpointing connection opens it alike).
    private let openFlags: Int32
    private let vfs: String?
    private var checkpointer: IdleCheckpointer?
    /// Schema facts the layers above keep for this connection (forgotten by a rollback).
    package var schemaFacts = SchemaFacts()
    /// What a commit survives unless a transaction says otherwise.
    public let durability: Durability
    /// Set inside a deferred transaction that wrote what only this device holds.
    private var commitNeedsFlush = false
    /// The sync level is still lowered after a deferred transaction (its
    /// reset failed): the next transaction sets it back first.
    private var syncLevelLowered = false

    /// Opens (creating if needed) a database file in WAL mode.
    ///
    /// With `durability` `.powerLoss` (the default) a commit is on stable
    /// storage when it returns: `synchronous=FULL` syncs the WAL in every
    /// commit, and on Apple platforms `fullfsync` asks the drive itself to
    /// flush (a plain fsync there only reaches the drive's cache).
    /// `.processCrash` (`synchronous=NORMAL`) keeps every commit across a
    /// process crash but may lose the last ones to a power loss.
    ///
    /// `protection` is the Apple data protection class of the file and its
    /// WAL/SHM files (ignored where there is none).
    ///
    /// `immutable` (with `readOnly`) reads a file nobody can write, such as
    /// one on a read-only filesystem, without the WAL's shared-memory file
    /// that could not be created there. `vfs` names a registered SQLite VFS
    /// (tests inject disk faults through one).
    ///
    /// `busyTimeoutMilliseconds`: how long a statement, opening's own
    /// included, waits for another connection's lock (another process
    /// sharing the file) before failing with "database is locked".
    public init(
        path: String, readOnly: Bool = false, immutable: Bool = false, protection: FileProtection = .untilFirstUnlock,
        vfs: String? = nil, durability: Durability = .powerLoss, busyTimeoutMilliseconds: Int32 = 5_000
    ) throws {
        _ = Self.allocationCountsOff
        var handle: OpaquePointer?
        var flags =
            (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX
            | protection.openFlag
        var name = path
        if readOnly && immutable {
            flags |= SQLITE_OPEN_URI
            let escaped = path.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "?", with: "%3f")
                .replacingOccurrences(of: "#", with: "%23")
            name = "file:\(escaped)?immutable=1"
        }
        let code = sqlite3_open_v2(name, &handle, flags, vfs)
        guard code == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            if let handle { sqlite3_close_v2(handle) }
            throw SQLiteError(extendedCode: code, message: message + " (\(path))")
        }
        self.handle = handle
        self.path = path
        self.openFlags = flags & ~SQLITE_OPEN_CREATE
        self.vfs = vfs
        self.durability = durability
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, busyTimeoutMilliseconds)
        do {
            if !readOnly {
                try switchToWriteAheadLog(waitingUpTo: busyTimeoutMilliseconds)
                switch durability {
                case .powerLoss:
                    try execute("PRAGMA synchronous = FULL")
                    #if canImport(Darwin)
                    try execute("PRAGMA fullfsync = ON")
                    try execute("PRAGMA checkpoint_fullfsync = ON")
                    #endif
                case .processCrash:
                    try execute("PRAGMA synchronous = NORMAL")
                }
            }
            try execute("PRAGMA foreign_keys = ON")
        } catch {
            sqlite3_close_v2(handle)
            throw error
        }
    }

    /// Switches the file to WAL (nothing to do when it is already). SQLite
    /// answers "locked" at once, without waiting for the busy timeout, when
    /// connections that all read a new file ask together to switch it:
    /// each holds what the other waits for. An app and its extension
    /// creating their store at the same moment met it. So the switch is
    /// tried again, a few milliseconds apart, until the timeout.
    private func switchToWriteAheadLog(waitingUpTo milliseconds: Int32) throws {
        let deadline = ContinuousClock.now + .milliseconds(Int64(max(0, milliseconds)))
        var pauseMilliseconds: Int64 = 1
        while true {
            do {
                return try execute("PRAGMA journal_mode = WAL")
            } catch let error as SQLiteError where error.code == .busy && ContinuousClock.now + .milliseconds(pauseMilliseconds) < deadline {
                Thread.sleep(forTimeInterval: Double(pauseMilliseconds) / 1000)
                pauseMilliseconds = min(pauseMilliseconds * 2, 50)
            }
        }
    }

    /// Whether SQLite keeps no allocation counts in this process. It
    /// counts every allocation under one process-wide mutex unless told
    /// not to: with many connections at work at once (a thousand stores in
    /// one process) their threads queued on it, a thread switch for most of
    /// a live change's statements. Nothing here reads those counts. It can
    /// be said only before SQLite's first use in the process, so the first
    /// connection says it (anything else that uses SQLite first reads this
    /// before); false when said too late, or with Apple's SQLite.
    package static let allocationCountsOff: Bool = {
        #if canImport(SQLite3)
        return false
        #else
        return outpost_sqlite3_config_memstatus(0) == SQLITE_OK
        #endif
    }()

    /// Bytes SQLite counts as allocated now (0 while it counts nothing).
    package static var memoryCounted: Int64 { sqlite3_memory_used() }

    /// How long a statement waits for another connection's lock before
    /// failing with "database is locked" (5 s unless set).
    public func setBusyTimeout(milliseconds: Int32) {
        sqlite3_busy_timeout(handle, milliseconds)
    }

    /// Changes whenever another connection (another process's included)
    /// commits to the file; this connection's own commits leave it as it
    /// is. Reading it costs no I/O while nothing changed.
    public func dataVersion() throws -> Int64 {
        try first("PRAGMA data_version") { $0.int64(0) } ?? 0
    }

    deinit { close() }

    /// Finalizes every cached statement and closes the handle.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        statements.removeAll()
        statementsByAddress.removeAll()
        if let checkpointer {
            sqlite3_wal_hook(handle, nil, nil)
            checkpointer.close()
        }
        sqlite3_close_v2(handle)
    }

    /// Moves WAL checkpoints out of this connection's commits into the
    /// pauses between them, on a connection and thread of their own
    /// (``IdleCheckpointer``); under writes without a pause, a commit
    /// checkpoints once the WAL reaches 16 MB. For a connection that writes
    /// in WAL mode.
    public func checkpointWhenIdle() {
        guard checkpointer == nil, !isClosed else { return }
        let checkpointer = IdleCheckpointer(path: path, flags: openFlags, vfs: vfs)
        self.checkpointer = checkpointer
        // Replaces SQLite's automatic checkpoint, which is itself a WAL hook.
        sqlite3_wal_hook(
            handle,
            { context, database, name, pages in
                guard let context else { return SQLITE_OK }
                let checkpointer = Unmanaged<IdleCheckpointer>.fromOpaque(context).takeUnretainedValue()
                if checkpointer.committed(walPages: pages) {
                    // No pause came before the WAL reached the backstop: this
                    // commit checkpoints, as SQLite's own would.
                    sqlite3_wal_checkpoint_v2(database, name, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
                }
                return SQLITE_OK
            }, Unmanaged.passUnretained(checkpointer).toOpaque())
    }

    /// While `held` (a first download with pages to come), commits leave
    /// their pages in the WAL and one checkpoint follows the release
    /// (``IdleCheckpointer/hold(_:)``); nothing without ``checkpointWhenIdle()``.
    package func holdCheckpoints(_ held: Bool) { checkpointer?.hold(held) }

    /// Checkpoints run on the checkpointer's connection so far, how many
    /// failed, and how many ran beside bulk writes instead of in a pause
    /// (nil when checkpoints run in commits, SQLite's default).
    public var idleCheckpoints: (completed: Int, failed: Int, besideWrites: Int)? { checkpointer?.runs }

    func error(code: Int32, sql: String?) -> SQLiteError {
        SQLiteError(extendedCode: code, message: String(cString: sqlite3_errmsg(handle)), sql: sql)
    }

    private func statement(_ sql: String) throws -> SQLiteStatement {
        // Short texts hash quickly, and are copied to the stack to be read.
        let address = sql.utf8.count > 32 ? sql.utf8.withContiguousStorageIfAvailable { UnsafeRawPointer($0.baseAddress) } ?? nil : nil
        // The same text at the same place compares equal without reading it.
        if let address, let known = statementsByAddress[address], known.sql == sql { return known.statement }
        let statement: SQLiteStatement
        if let cached = statements[sql] {
            statement = cached
        } else {
            statement = try SQLiteStatement(connection: self, sql: sql)
            statements[sql] = statement
        }
        if let address {
            // Texts built for one call come once each: the table stays small.
            if statementsByAddress.count >= 64 { statementsByAddress.removeAll(keepingCapacity: true) }
            statementsByAddress[address] = (sql, statement)
        }
        return statement
    }

    /// A cached statement for a loop that binds each row itself.
    public func prepared(_ sql: String) throws -> SQLitePreparedStatement {
        let statement = try statement(sql)
        statement.reset()
        sqlite3_clear_bindings(statement.handle)
        return SQLitePreparedStatement(statement: statement)
    }

    /// Runs one or more statements without parameters (schema, pragmas).
    public func execute(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &message)
        guard code == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? "failed"
            sqlite3_free(message)
            throw SQLiteError(extendedCode: code, message: text, sql: sql)
        }
    }

    /// Runs one statement with parameters and returns the number of rows changed.
    @discardableResult
    public func run(_ sql: String, _ values: [SQLiteValue] = []) throws -> Int {
        let statement = try statement(sql)
        try statement.bind(values)
        defer { statement.reset() }
        while try statement.step() {}
        return Int(sqlite3_changes(handle))
    }

    /// Runs a query and calls `body` with each row.
    public func forEach(_ sql: String, _ values: [SQLiteValue] = [], _ body: (SQLiteRow) throws -> Void) throws {
        let statement = try statement(sql)
        try statement.bind(values)
        defer { statement.reset() }
        while try statement.step() {
            try body(SQLiteRow(statement: statement.handle))
        }
    }

    /// Runs a query and maps each row.
    public func query<T>(_ sql: String, _ values: [SQLiteValue] = [], _ map: (SQLiteRow) throws -> T) throws -> [T] {
        var result: [T] = []
        try forEach(sql, values) { result.append(try map($0)) }
        return result
    }

    /// The first row mapped, or nil when the query returns none.
    public func first<T>(_ sql: String, _ values: [SQLiteValue] = [], _ map: (SQLiteRow) throws -> T) throws -> T? {
        let statement = try statement(sql)
        try statement.bind(values)
        defer { statement.reset() }
        return try statement.step() ? try map(SQLiteRow(statement: statement.handle)) : nil
    }

    public var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    ///
    /// `BEGIN IMMEDIATE` takes the write lock up front, so a transaction never
    /// fails half way with SQLITE_BUSY on its first write.
    ///
    /// `flush` `.deferred` commits without syncing the WAL, for a
    /// transaction that stores only what the server already holds (a page
    /// and its cursor): a power loss takes it whole, back to an earlier
    /// consistent state, and the next synced commit syncs it along. A body
    /// that wrote something else after all calls ``flushThisCommit()``.
    public func transaction<T>(flush: CommitFlush = .durable, _ body: () throws -> T) throws -> T {
        let deferring = flush == .deferred && durability == .powerLoss
        // SQLite refuses to change its sync level inside a transaction, so
        // it is lowered before and raised again after.
        if deferring != syncLevelLowered {
            try run(deferring ? "PRAGMA synchronous = NORMAL" : "PRAGMA synchronous = FULL")
            syncLevelLowered = deferring
        }
        defer {
            if deferring, (try? run("PRAGMA synchronous = FULL")) != nil { syncLevelLowered = false }
            commitNeedsFlush = false
        }
        // Cached statements: compiling BEGIN and COMMIT for every local write
        // was a measurable part of one.
        try run("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try run("COMMIT")
            if deferring && commitNeedsFlush { try syncWriteAheadLog() }
            return result
        } catch {
            schemaFacts.forget()
            if isInTransaction { _ = try? run("ROLLBACK") }
            throw error
        }
    }

    /// Inside a `.deferred` transaction: this one wrote something the
    /// server does not hold, so its commit returns only once on the disk,
    /// as a durable one does. Elsewhere it changes nothing.
    public func flushThisCommit() {
        if isInTransaction { commitNeedsFlush = true }
    }

    /// Syncs the WAL file, every frame in it, as a synced commit does; on
    /// Apple platforms down to the drive (`F_FULLFSYNC`), as `fullfsync` asks.
    private func syncWriteAheadLog() throws {
        var file: UnsafeMutablePointer<sqlite3_file>?
        let found = sqlite3_file_control(handle, "main", SQLITE_FCNTL_JOURNAL_POINTER, &file)
        guard found == SQLITE_OK, let file, let methods = file.pointee.pMethods, let sync = methods.pointee.xSync else {
            throw SQLiteError(extendedCode: found == SQLITE_OK ? SQLITE_MISUSE : found, message: "no WAL file to sync (\(path))")
        }
        #if canImport(Darwin)
        let flags = SQLITE_SYNC_FULL
        #else
        let flags = SQLITE_SYNC_NORMAL
        #endif
        let code = sync(file, flags)
        guard code == SQLITE_OK else { throw error(code: code, sql: nil) }
    }

    /// Whether a transaction is open on this connection.
    public var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }
}

/// Whether one transaction's commit syncs the WAL (see
/// ``SQLiteConnection/transaction(flush:_:)``).
public enum CommitFlush: Sendable, Equatable {
    /// As the connection's ``Durability`` says.
    case durable
    /// Not synced by this commit: a power loss may take it, whole; the
    /// next synced commit syncs it with everything before.
    case deferred
}

/// What a committed transaction survives.
public enum Durability: Sendable, Equatable {
    /// A power loss or kernel crash: the commit is on stable storage when it
    /// returns (the default, and what an acknowledged write promises).
    case powerLoss
    /// A process crash only: the operating system holds the commit and
    /// writes it later, so a power loss may lose the last commits (never
    /// corrupt the file). Faster where every write waits for the disk.
    case processCrash
}

/// Apple's data protection for the database files: readable only
/// while, or once, the device has been unlocked. SQLite applies it to the
/// database, WAL and SHM files it creates.
public enum FileProtection: Sendable {
    /// Readable after the first unlock since boot: background sync still works.
    case untilFirstUnlock
    /// Readable only while the device is unlocked: no background sync when locked.
    case complete
    /// No protection class.
    case none

    /// The `SQLITE_OPEN_FILEPROTECTION_*` flag of Apple's SQLite (values from its
    /// sqlite3.h); 0 elsewhere, where the flag means nothing.
    var openFlag: Int32 {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
        switch self {
        case .complete: return 0x0010_0000
        case .untilFirstUnlock: return 0x0030_0000
        case .none: return 0x0040_0000
        }
        #else
        return 0
        #endif
    }
}
