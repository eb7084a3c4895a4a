import Foundation
package import OutpostSQLite

/// The embedded default: one SQLite file, zero set-up.
///
/// One writer connection behind a lock (SQLite allows one writer at a time
/// anyway; `BEGIN IMMEDIATE` also serialises against other processes), and a
/// pool of reader connections that read WAL snapshots concurrently.
public final class SQLiteServerDatabase: ServerDatabase, @unchecked Sendable {
    // @unchecked Sendable: `writer` is only used while `writeLock` is held;
    // `idleReaders` only while `poolLock` is held, and a reader taken from
    // the pool is used by one thread until it is given back.
    private let writer: SQLiteConnection
    private let writeLock = NSLock()
    private let poolLock = NSLock()
    private var idleReaders: [SQLiteConnection] = []
    private var closed = false
    public let path: String
    private let vfs: String?
    public var dialect: SQLDialect { .sqlite }

    /// `lockWait`: how long a write waits for another process's write lock
    /// before the push answers 503 (SQLite's busy timeout; 5 s unless set).
    ///
    /// Every write is on stable storage when it returns (the WAL synced in
    /// each commit): the server answers for a push only once a power loss
    /// can no longer take it back.
    public convenience init(path: String, lockWait: Double? = nil) throws {
        try self.init(path: path, lockWait: lockWait, vfs: nil, durability: .powerLoss)
    }

    /// The same through a named SQLite VFS (the simulation's power loss),
    /// and with a durability the tests choose (to show what a power loss
    /// takes when commits are not synced).
    package init(path: String, lockWait: Double? = nil, vfs: String?, durability: Durability) throws {
        self.path = path
        self.vfs = vfs
        do {
            writer = try SQLiteConnection(path: path, vfs: vfs, durability: durability)
        } catch let error as SQLiteError {
            throw DatabaseError(kind: .failure, message: "cannot open the database at \(path): \(error.message)")
        }
        lockWaitMilliseconds = lockWait.map { Int32(max(0.001, min($0, 3600)) * 1000) }
        if let lockWaitMilliseconds { writer.setBusyTimeout(milliseconds: lockWaitMilliseconds) }
        // Pushes come in bursts: the WAL is copied back into the database
        // file between them rather than inside a push's commit.
        writer.checkpointWhenIdle()
    }

    /// Set on every connection, readers included: a reader can meet the lock too.
    private let lockWaitMilliseconds: Int32?

    public func write<T>(_ body: (any SQLExecutor) throws -> T) throws -> T {
        writeLock.lock()
        defer { writeLock.unlock() }
        return try Self.mapErrors {
            try writer.transaction { try body(SQLiteExecutor(connection: writer)) }
        }
    }

    public func read<T>(_ body: (any SQLExecutor) throws -> T) throws -> T {
        let reader = try takeReader()
        defer { giveBack(reader) }
        return try Self.mapErrors {
            try reader.execute("BEGIN")
            defer { try? reader.execute("COMMIT") }
            return try body(SQLiteExecutor(connection: reader))
        }
    }

    public func close() {
        writeLock.lock()
        poolLock.lock()
        closed = true
        idleReaders.forEach { $0.close() }
        idleReaders.removeAll()
        writer.close()
        poolLock.unlock()
        writeLock.unlock()
    }

    private func takeReader() throws -> SQLiteConnection {
        poolLock.lock()
        if closed {
            // A closed database opens no new connection (a timer of a server
            // being shut down, a request that arrived as it closed).
            poolLock.unlock()
            throw DatabaseError(kind: .failure, message: "the database at \(path) is closed")
        }
        if let reader = idleReaders.popLast() {
            poolLock.unlock()
            return reader
        }
        poolLock.unlock()
        let reader = try Self.mapErrors { try SQLiteConnection(path: path, vfs: vfs) }
        if let lockWaitMilliseconds { reader.setBusyTimeout(milliseconds: lockWaitMilliseconds) }
        return reader
    }

    private func giveBack(_ reader: SQLiteConnection) {
        poolLock.lock()
        defer { poolLock.unlock() }
        if closed || idleReaders.count >= 16 {
            reader.close()
        } else {
            idleReaders.append(reader)
        }
    }

    static func mapErrors<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as SQLiteError {
            let kind: DatabaseError.Kind
            switch error.code {
            case .busy, .locked: kind = .transient
            case .constraint: kind = .constraint
            default: kind = .failure
            }
            throw DatabaseError(kind: kind, message: error.message, sql: error.sql)
        }
    }
}

/// Runs server SQL on a SQLite connection.
struct SQLiteExecutor: SQLExecutor {
    let connection: SQLiteConnection
    var dialect: SQLDialect { .sqlite }

    func execute(_ sql: String, _ arguments: [SQLValue]) throws -> Int {
        try connection.run(sql, arguments.map(Self.convert))
    }

    func scan(_ sql: String, _ arguments: [SQLValue], _ body: (SQLRawRow) throws -> Void) throws {
        try connection.forEach(sql, arguments.map(Self.convert)) { try body(SQLRawRow(source: .sqlite($0))) }
    }

    func insertReturningID(_ sql: String, _ arguments: [SQLValue]) throws -> Int64 {
        try connection.run(sql, arguments.map(Self.convert))
        return connection.lastInsertRowID
    }

    static func convert(_ value: SQLValue) -> SQLiteValue {
        switch value {
        case .null: return .null
        case .integer(let number): return .integer(number)
        case .real(let number): return .real(number)
        case .text(let text): return .text(text)
        case .blob(let bytes): return .blob(Data(bytes))
        }
    }
}
