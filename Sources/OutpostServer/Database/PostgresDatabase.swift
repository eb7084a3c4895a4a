import CLibPQ
import Foundation
import OutpostCore

/// PostgreSQL storage, for several server processes sharing one database.
///
/// A small pool of libpq connections, opened lazily. Writes of different
/// users run in parallel (READ COMMITTED); what must not interleave is kept
/// apart by row locks the sync logic takes (`SELECT … FOR UPDATE` on the
/// client's sequence row and on each record it changes). The change feed
/// stays gap-free without serialising writers: see `FeedVersions` and
/// `FeedWatermark`. A write that meets a concurrent one (a deadlock, two
/// creates of one record, a record a later transaction wrote first) is
/// rolled back and run again, a few times at most.
///
/// `read` runs in a REPEATABLE READ READ ONLY transaction: one consistent
/// snapshot, whose oldest running transaction bounds what the feed returns.
///
/// The first design, every write serialised behind one advisory lock of
/// the schema, is kept as `WriteConcurrency.schemaLock` (package only, not
/// for deployments) because the scale-out benchmark's target is a ratio
/// against it, measured in the same run.
///
/// Statements are prepared once per connection (the server's `?`
/// placeholders rewritten to `$1…$n`), parameters and results travel as text.
///
/// Every connection runs with `lock_timeout`, `statement_timeout` and an
/// `idle_in_transaction_session_timeout` of the statement timeout: a server
/// frozen inside a transaction (SIGSTOP, a debugger) makes writers of the
/// same rows answer 503 for a while, never hang, and PostgreSQL ends its
/// transaction, so the feed's watermark moves on.
public final class PostgresDatabase: ServerDatabase, @unchecked Sendable {
    // Why `@unchecked Sendable` is sound:
    // - `idle`, `openCount` and `closed` are only read or written while `pool`
    //   (an NSCondition, itself thread-safe) is locked; `deinit` runs when no
    //   other reference, hence no other thread, exists.
    // - A `PostgresConnection` (one PGconn*) belongs to one thread at a time: it
    //   is either in `idle` (touched only under the lock) or was taken out by
    //   `checkout()` and is used only by the thread inside that `read`/`write`
    //   call, until `checkin()` puts it back or finishes it. libpq is built
    //   thread-safe: different connections may be used on different threads,
    //   one connection must never be used by two at once, which this ensures.
    //   Executors hold a connection but are valid only inside the closure they
    //   are passed to (the `SQLExecutor` contract), so none outlives its checkout.
    // - `writeLock` is an NSLock; `url`, `redactedURL`, `poolSize` and
    //   `timeouts` are immutable `let`s of Sendable types.
    private let url: String
    private let redactedURL: String
    private let poolSize: Int
    private let timeouts: DatabaseTimeouts
    private let pool = NSCondition()
    private var idle: [PostgresConnection] = []
    private var openCount = 0
    private var closed = false
    /// With ``WriteConcurrency/schemaLock``: serialises this process's
    /// writers before they take a connection, so writers queued on the
    /// advisory lock never hold the whole pool.
    private let writeLock = NSLock()
    /// How writers are kept apart.
    package let writeConcurrency: WriteConcurrency

    /// How write transactions of several servers are kept apart.
    package enum WriteConcurrency: String, Sendable, CaseIterable {
        /// Row locks only: writes of different users run in parallel.
        case rowLocks = "rows"
        /// One advisory lock per schema around every write (the round-1
        /// design, kept for comparison).
        case schemaLock = "schema"
    }

    private let waited = Locked(DatabaseWaits())
    public var waits: DatabaseWaits? { waited.current }

    private func recordWait(since start: UInt64, retry: Bool = false) {
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        waited.withLock { waits in
            waits.seconds += seconds
            if retry { waits.retries += 1 }
        }
    }

    /// Times a write meeting a concurrent one is run again before it fails as busy.
    static let writeAttempts = 8

    public var dialect: SQLDialect { .postgres }

    public func announce(_ payload: String, in sql: any SQLExecutor) throws {
        _ = try sql.query("SELECT pg_notify('outpost_commits_' || left(current_schema(), 40), ?)", [.text(payload)])
    }

    public func listenForCommits(
        log: @escaping @Sendable (String) -> Void, _ onPayload: @escaping @Sendable (String) -> Void
    ) -> (any CommitListening)? {
        PostgresCommitListener(url: url, redactedURL: redactedURL, log: log, onPayload: onPayload)
    }

    /// Takes the transaction-scoped advisory lock of the connection's
    /// schema, which every write takes: the first key is "Outp" in ASCII,
    /// the second the schema name's hash.
    static let writeLockStatement = "SELECT pg_advisory_xact_lock(1333097584, hashtext(current_schema()))"

    /// Connects to `url` (a libpq connection URI such as
    /// `postgres://user@127.0.0.1:5432/db`); fails when the first connection fails.
    public convenience init(url: String, poolSize: Int = 8, timeouts: DatabaseTimeouts = DatabaseTimeouts()) throws {
        try self.init(url: url, poolSize: poolSize, timeouts: timeouts, writeConcurrency: .rowLocks)
    }

    /// Also takes the design of write concurrency (the benchmark's comparison).
    package init(
        url: String, poolSize: Int = 8, timeouts: DatabaseTimeouts = DatabaseTimeouts(),
        writeConcurrency: WriteConcurrency
    ) throws {
        self.writeConcurrency = writeConcurrency
        self.url = url
        self.redactedURL = Self.redact(url)
        self.poolSize = max(1, poolSize)
        self.timeouts = timeouts
        let first = try PostgresConnection(url: url, redactedURL: redactedURL, timeouts: timeouts, failureKind: .failure)
        idle = [first]
        openCount = 1
    }

    deinit {
        for connection in idle { connection.finish() }
    }

    public func write<T>(_ body: (any SQLExecutor) throws -> T) throws -> T {
        guard writeConcurrency == .schemaLock else {
            var attempt = 1
            while true {
                do {
                    return try transaction(begin: "BEGIN", lock: nil, body)
                } catch where attempt < Self.writeAttempts && Self.meetsConcurrentWrite(error) {
                    // A few milliseconds apart, so two writers that deadlocked
                    // do not meet again in step.
                    attempt += 1
                    let start = DispatchTime.now().uptimeNanoseconds
                    usleep(UInt32.random(in: 200...2_000) * UInt32(attempt))
                    recordWait(since: start, retry: true)
                }
            }
        }
        // This process's writers queue here, not on the advisory lock; the
        // wait is bounded like the database's own lock wait.
        let waitStart = DispatchTime.now().uptimeNanoseconds
        guard writeLock.lock(before: Date(timeIntervalSinceNow: timeouts.lock)) else {
            recordWait(since: waitStart)
            throw DatabaseError(
                kind: .transient,
                message: "another write of this server held the write lock for more than \(timeouts.lock) s")
        }
        defer { writeLock.unlock() }
        recordWait(since: waitStart)
        return try transaction(begin: "BEGIN", lock: Self.writeLockStatement, body)
    }

    /// Whether a write failed only because another ran beside it, so running
    /// it again as a new transaction can succeed: a deadlock (40P01), a
    /// serialization failure (40001), a unique key another transaction
    /// inserted meanwhile (23505: two creates of one record), or a record a
    /// later transaction wrote first (``FeedVersionBehind``).
    static func meetsConcurrentWrite(_ error: any Error) -> Bool {
        if error is FeedVersionBehind { return true }
        guard let error = error as? DatabaseError, let state = error.sqlState else { return false }
        return state == "40P01" || state == "40001" || state == "23505"
    }

    public func read<T>(_ body: (any SQLExecutor) throws -> T) throws -> T {
        try transaction(begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", lock: nil, body)
    }

    /// Runs one statement outside any transaction: `VACUUM`, which cannot
    /// run inside one.
    package func runOutsideTransaction(_ sql: String) throws {
        let connection = try checkout()
        defer { checkin(connection) }
        try connection.command(sql)
    }

    public func close() {
        pool.lock()
        closed = true
        let connections = idle
        idle.removeAll()
        openCount -= connections.count
        pool.broadcast()
        pool.unlock()
        // Connections in use are finished when they are checked in.
        for connection in connections { connection.finish() }
    }

    // MARK: - Transactions

    private func transaction<T>(
        begin: String, lock: String?, _ body: (any SQLExecutor) throws -> T
    ) throws -> T {
        var attempts = 0
        while true {
            let connection = try checkout()
            do {
                try connection.command(begin)
            } catch {
                // A pooled connection may have died while idle (server restart,
                // terminated backend). Nothing has run yet, so try a fresh one.
                let broken = connection.isBroken
                checkin(connection)
                attempts += 1
                if broken && attempts <= poolSize { continue }
                throw error
            }
            defer { checkin(connection) }
            do {
                if let lock {
                    let start = DispatchTime.now().uptimeNanoseconds
                    defer { recordWait(since: start) }
                    try connection.command(lock)
                }
                let result = try body(PostgresExecutor(connection: connection))
                try connection.commit()
                return result
            } catch {
                connection.rollback()
                throw error
            }
        }
    }

    // MARK: - Pool

    private func checkout() throws -> PostgresConnection {
        // Waiting for a connection is waiting for a lock too.
        let deadline = Date(timeIntervalSinceNow: timeouts.lock)
        let start = DispatchTime.now().uptimeNanoseconds
        defer { recordWait(since: start) }
        pool.lock()
        while true {
            if closed {
                pool.unlock()
                throw DatabaseError(kind: .failure, message: "the PostgreSQL database at \(redactedURL) is closed")
            }
            if let connection = idle.popLast() {
                pool.unlock()
                return connection
            }
            if openCount < poolSize {
                openCount += 1  // reserve the slot, connect outside the lock
                pool.unlock()
                break
            }
            if !pool.wait(until: deadline) && idle.isEmpty && openCount >= poolSize {
                pool.unlock()
                throw DatabaseError(
                    kind: .transient,
                    message: "all \(poolSize) PostgreSQL connections stayed busy for \(timeouts.lock) s")
            }
        }
        do {
            return try PostgresConnection(url: url, redactedURL: redactedURL, timeouts: timeouts, failureKind: .transient)
        } catch {
            pool.lock()
            openCount -= 1
            pool.signal()
            pool.unlock()
            throw error
        }
    }

    /// Gives a connection back, or finishes it when it is broken, still in a
    /// transaction, or the database was closed (the next use opens a new one).
    private func checkin(_ connection: PostgresConnection) {
        let reusable = connection.isReusable
        pool.lock()
        let keep = reusable && !closed
        if keep {
            idle.append(connection)
        } else {
            openCount -= 1
        }
        pool.signal()
        pool.unlock()
        if !keep { connection.finish() }
    }

    // MARK: - Redaction

    /// The URL with any password removed, for error messages.
    static func redact(_ url: String) -> String {
        var text = url
        if let scheme = text.range(of: "://") {
            let rest = text[scheme.upperBound...]
            let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
            let authority = rest[..<authorityEnd]
            if let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") {
                text.removeSubrange(colon..<at)
            }
        }
        // `?password=…` in a URI, `password=…` in a keyword/value string.
        guard
            let pattern = try? NSRegularExpression(
                pattern: #"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]*)"#, options: [.caseInsensitive])
        else { return text }
        return pattern.stringByReplacingMatches(
            in: text, range: NSRange(text.startIndex..., in: text), withTemplate: "$1***")
    }
}

/// Runs server SQL on one pooled PostgreSQL connection, inside a transaction.
struct PostgresExecutor: SQLExecutor {
    let connection: PostgresConnection
    var dialect: SQLDialect { .postgres }

    func execute(_ sql: String, _ arguments: [SQLValue]) throws -> Int {
        try connection.withResult(sql, arguments) { result in
            guard let tuples = PQcmdTuples(result) else { return 0 }
            return Int(String(cString: tuples)) ?? 0
        }
    }

    func scan(_ sql: String, _ arguments: [SQLValue], _ body: (SQLRawRow) throws -> Void) throws {
        try connection.withResult(sql, arguments) { result in
            for row in 0..<PQntuples(result) {
                try body(SQLRawRow(source: .postgres(result: result, row: row)))
            }
        }
    }

    func insertReturningID(_ sql: String, _ arguments: [SQLValue]) throws -> Int64 {
        guard let id = try first(sql + " RETURNING id", arguments)?.int(0) else {
            throw DatabaseError(kind: .failure, message: "the row just inserted has no id")
        }
        return id
    }

    static func bytes(_ result: OpaquePointer, _ row: Int32, _ column: Int32) -> UnsafeBufferPointer<UInt8>? {
        guard PQgetisnull(result, row, column) == 0, let value = PQgetvalue(result, row, column) else { return nil }
        return UnsafeBufferPointer(
            start: UnsafeRawPointer(value).assumingMemoryBound(to: UInt8.self), count: Int(PQgetlength(result, row, column)))
    }
}

/// One libpq connection and its prepared statements. Not thread-safe: used by
/// one thread at a time (see `PostgresDatabase`).
final class PostgresConnection {
    private let handle: OpaquePointer
    private var finished = false
    private var statements: [String: Statement] = [:]
    private var statementCounter = 0
    /// The kind of the last failed statement, reported when COMMIT finds the
    /// transaction already aborted (the body caught the error and went on).
    private var lastFailure: DatabaseError.Kind?

    /// Beyond this many prepared statements on one connection, new SQL runs
    /// unprepared, so dynamically built SQL cannot grow the cache without bound.
    static let maxPreparedStatements = 512

    private struct Statement {
        /// nil: run unprepared with PQexecParams.
        var name: String?
        var text: String
        var parameterCount: Int
    }

    init(url: String, redactedURL: String, timeouts: DatabaseTimeouts, failureKind: DatabaseError.Kind) throws {
        guard let handle = PostgresConnect.open(url) else {
            throw DatabaseError(kind: failureKind, message: "cannot connect to PostgreSQL at \(redactedURL): out of memory")
        }
        guard PQstatus(handle) == CONNECTION_OK else {
            let message = Self.trimmed(PQerrorMessage(handle))
            PQfinish(handle)
            throw DatabaseError(kind: failureKind, message: "cannot connect to PostgreSQL at \(redactedURL): \(message)")
        }
        // Results travel as UTF-8 text whatever the database's default.
        guard PQsetClientEncoding(handle, "UTF8") == 0 else {
            let message = Self.trimmed(PQerrorMessage(handle))
            PQfinish(handle)
            throw DatabaseError(
                kind: failureKind, message: "cannot set the client encoding of PostgreSQL at \(redactedURL): \(message)")
        }
        // NOTICEs ("relation already exists, skipping", …) would go to stderr.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        // Session settings, so they hold for every transaction on this
        // connection whatever the URL's own options say. Custom plans:
        // statements are prepared once per connection, and PostgreSQL's
        // generic plan for one prepared while a table was still small (a new
        // deployment, before autovacuum's ANALYZE) scanned the whole table
        // for every record lookup of a push: 0.46 ms each at 10,000 records,
        // push intake 350/s instead of 1,900/s. Planning each execution costs
        // tens of microseconds and always sees the value looked up.
        let settings = """
            SET lock_timeout = \(Self.milliseconds(timeouts.lock)); SET statement_timeout = \(Self.milliseconds(timeouts.statement));
            SET idle_in_transaction_session_timeout = \(Self.milliseconds(timeouts.statement));
            SET plan_cache_mode = force_custom_plan
            """
        let result = PQexec(handle, settings)
        defer { PQclear(result) }
        guard let result, PQresultStatus(result) == PGRES_COMMAND_OK else {
            let message = Self.trimmed(PQerrorMessage(handle))
            PQfinish(handle)
            throw DatabaseError(kind: failureKind, message: "cannot set the timeouts of PostgreSQL at \(redactedURL): \(message)")
        }
        self.handle = handle
    }

    static func milliseconds(_ seconds: TimeInterval) -> Int { max(1, Int((seconds * 1000).rounded())) }

    deinit { finish() }

    func finish() {
        guard !finished else { return }
        finished = true
        PQfinish(handle)
    }

    var isBroken: Bool { finished || PQstatus(handle) != CONNECTION_OK }

    /// Connected and outside any transaction: safe to hand to the next caller.
    var isReusable: Bool { !isBroken && PQtransactionStatus(handle) == PQTRANS_IDLE }

    /// Runs a statement without parameters (transaction control).
    func command(_ sql: String) throws {
        let result = PQexec(handle, sql)
        defer { PQclear(result) }
        try check(result, sql: sql)
    }

    func commit() throws {
        if PQtransactionStatus(handle) == PQTRANS_INERROR {
            // PostgreSQL would answer COMMIT with a silent ROLLBACK.
            let kind = lastFailure ?? .failure
            rollback()
            throw DatabaseError(
                kind: kind, message: "the transaction was aborted by an earlier failed statement and rolled back",
                sql: "COMMIT")
        }
        let result = PQexec(handle, "COMMIT")
        defer { PQclear(result) }
        try check(result, sql: "COMMIT")
        if let status = PQcmdStatus(result), String(cString: status) == "ROLLBACK" {
            throw DatabaseError(kind: lastFailure ?? .failure, message: "the transaction was rolled back", sql: "COMMIT")
        }
    }

    /// Ends the open transaction, if any; errors are ignored (a connection
    /// left in a transaction is not reused).
    func rollback() {
        guard !isBroken else { return }
        let status = PQtransactionStatus(handle)
        guard status == PQTRANS_INTRANS || status == PQTRANS_INERROR else { return }
        PQclear(PQexec(handle, "ROLLBACK"))
    }

    /// Runs `sql` (with `?` placeholders) and passes its successful result to `read`.
    func withResult<T>(_ sql: String, _ arguments: [SQLValue], _ read: (OpaquePointer) throws -> T) throws -> T {
        let statement = try prepare(sql)
        guard arguments.count == statement.parameterCount else {
            throw DatabaseError(
                kind: .failure,
                message: "the statement has \(statement.parameterCount) placeholders but \(arguments.count) arguments were given",
                sql: sql)
        }
        let result = try Self.withParameters(arguments, sql: sql) { values -> OpaquePointer? in
            if let name = statement.name {
                return PQexecPrepared(handle, name, Int32(arguments.count), values, nil, nil, 0)
            }
            return PQexecParams(handle, statement.text, Int32(arguments.count), nil, values, nil, nil, 0)
        }
        defer { PQclear(result) }
        try check(result, sql: sql)
        guard let result else { throw DatabaseError(kind: .failure, message: "no result", sql: sql) }
        return try read(result)
    }

    private func prepare(_ sql: String) throws -> Statement {
        if let statement = statements[sql] { return statement }
        let rewritten = PostgresSQL.rewritePlaceholders(sql)
        if statements.count >= Self.maxPreparedStatements || PostgresSQL.isSchemaChange(sql) {
            return Statement(name: nil, text: rewritten.sql, parameterCount: rewritten.count)
        }
        statementCounter += 1
        let name = "outpost_\(statementCounter)"
        let result = PQprepare(handle, name, rewritten.sql, Int32(rewritten.count), nil)
        defer { PQclear(result) }
        try check(result, sql: sql)
        let statement = Statement(name: name, text: rewritten.sql, parameterCount: rewritten.count)
        statements[sql] = statement
        return statement
    }

    /// Every parameter as a NUL-terminated text value, NULL as a null pointer.
    private static func withParameters<R>(
        _ arguments: [SQLValue], sql: String, _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R
    ) throws -> R {
        var owned: [UnsafeMutablePointer<CChar>?] = []
        owned.reserveCapacity(arguments.count)
        defer { owned.forEach { free($0) } }
        for argument in arguments {
            switch argument {
            case .null: owned.append(nil)
            case .integer(let value): owned.append(strdup(String(value)))
            case .real(let value): owned.append(strdup(String(value)))
            case .blob(let bytes):
                owned.append(strdup("\\x" + bytes.map { String(format: "%02x", $0) }.joined()))
            case .text(let value):
                guard !value.utf8.contains(0) else {
                    throw DatabaseError(kind: .failure, message: "PostgreSQL text cannot contain a NUL character", sql: sql)
                }
                owned.append(strdup(value))
            }
        }
        let pointers = owned.map { $0.map { UnsafePointer($0) } }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress) }
    }

    /// Throws a `DatabaseError` unless `result` is a success.
    private func check(_ result: OpaquePointer?, sql: String) throws {
        if let result {
            let status = PQresultStatus(result)
            if status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK { return }
        }
        let sqlState = result.flatMap { PQresultErrorField($0, PostgresSQL.sqlStateField) }.map { String(cString: $0) }
        var message = result.map { Self.trimmed(PQresultErrorMessage($0)) } ?? ""
        if message.isEmpty { message = Self.trimmed(PQerrorMessage(handle)) }
        if message.isEmpty, let result, let name = PQresStatus(PQresultStatus(result)) {
            message = "unexpected result \(String(cString: name))"
        }
        if let sqlState { message += " (SQLSTATE \(sqlState))" }
        let kind = PostgresSQL.kind(sqlState: sqlState, connectionOK: PQstatus(handle) == CONNECTION_OK)
        lastFailure = kind
        var error = DatabaseError(kind: kind, message: message, sql: sql, sqlState: sqlState)
        if let result {
            func field(_ code: Character) -> String? {
                PQresultErrorField(result, Int32(code.asciiValue!)).map { String(cString: $0) }
            }
            error.detail = DatabaseError.Detail(primary: field("M"), column: field("c"), constraint: field("n"))
        }
        throw error
    }

    private static func trimmed(_ text: UnsafePointer<CChar>?) -> String {
        guard let text else { return "" }
        return String(cString: text).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// SQL text helpers for the PostgreSQL dialect.
enum PostgresSQL {
    /// `PG_DIAG_SQLSTATE` ('C').
    static let sqlStateField = Int32(UInt8(ascii: "C"))

    /// Sorts a failure by SQLSTATE into "not now", "constraint" and "no".
    static func kind(sqlState: String?, connectionOK: Bool) -> DatabaseError.Kind {
        if !connectionOK { return .transient }
        guard let state = sqlState else { return .failure }
        // 55P03: lock_timeout ran out; 57014: statement_timeout (or a cancel).
        if state.hasPrefix("40") || state.hasPrefix("53") || state.hasPrefix("08")
            || state == "57P01" || state == "57P02" || state == "57P03" || state == "55P03" || state == "57014"
        {
            return .transient
        }
        if state.hasPrefix("23") { return .constraint }
        return .failure
    }

    /// DDL runs unprepared: it is run once and would only fill the cache.
    static func isSchemaChange(_ sql: String) -> Bool {
        let keyword = sql.drop(while: { $0.isWhitespace }).prefix(while: { $0.isLetter }).uppercased()
        return ["CREATE", "ALTER", "DROP", "TRUNCATE", "COMMENT", "GRANT", "REVOKE"].contains(keyword)
    }

    /// Rewrites `?` placeholders to `$1…$n`, leaving alone any `?` inside
    /// '…' literals (including E'…' escapes), "…" identifiers and comments.
    /// Cached per SQL text.
    static func rewritePlaceholders(_ sql: String) -> (sql: String, count: Int) {
        if let cached = cache.value(for: sql) { return cached }
        let rewritten = rewriteUncached(sql)
        cache.store(rewritten, for: sql)
        return rewritten
    }

    private static let cache = RewriteCache()

    static func rewriteUncached(_ sql: String) -> (sql: String, count: Int) {
        let bytes = Array(sql.utf8)
        guard bytes.contains(UInt8(ascii: "?")) else { return (sql, 0) }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count + 16)
        var count = 0
        var index = 0
        let quote = UInt8(ascii: "'"), doubleQuote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        let dash = UInt8(ascii: "-"), slash = UInt8(ascii: "/"), star = UInt8(ascii: "*")
        func isIdentifierByte(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: "_") || byte == UInt8(ascii: "$") || byte >= 0x80
                || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
        }
        while index < bytes.count {
            let byte = bytes[index]
            let next: UInt8? = index + 1 < bytes.count ? bytes[index + 1] : nil
            if byte == quote || byte == doubleQuote {
                // E'…' allows backslash escapes; '' and "" are handled by leaving
                // and re-entering the literal.
                let escapes =
                    byte == quote && index > 0 && (bytes[index - 1] | 0x20) == UInt8(ascii: "e")
                    && (index < 2 || !isIdentifierByte(bytes[index - 2]))
                output.append(byte)
                index += 1
                while index < bytes.count {
                    let inner = bytes[index]
                    output.append(inner)
                    index += 1
                    if escapes && inner == backslash && index < bytes.count {
                        output.append(bytes[index])
                        index += 1
                    } else if inner == byte {
                        break
                    }
                }
            } else if byte == dash && next == dash {
                while index < bytes.count && bytes[index] != UInt8(ascii: "\n") {
                    output.append(bytes[index])
                    index += 1
                }
            } else if byte == slash && next == star {
                // Block comments nest in PostgreSQL.
                var depth = 0
                while index < bytes.count {
                    let current = bytes[index]
                    let following: UInt8? = index + 1 < bytes.count ? bytes[index + 1] : nil
                    if current == slash && following == star {
                        depth += 1
                        output.append(contentsOf: [slash, star])
                        index += 2
                    } else if current == star && following == slash {
                        depth -= 1
                        output.append(contentsOf: [star, slash])
                        index += 2
                        if depth == 0 { break }
                    } else {
                        output.append(current)
                        index += 1
                    }
                }
            } else if byte == UInt8(ascii: "?") {
                count += 1
                output.append(UInt8(ascii: "$"))
                output.append(contentsOf: String(count).utf8)
                index += 1
            } else {
                output.append(byte)
                index += 1
            }
        }
        return (String(decoding: output, as: UTF8.self), count)
    }
}

/// The placeholder rewrites, shared by every connection.
private final class RewriteCache: Sendable {
    private let entries = Locked<[String: (sql: String, count: Int)]>([:])
    /// Dynamically built SQL must not grow the cache without bound.
    private let limit = 1024

    func value(for sql: String) -> (sql: String, count: Int)? {
        entries.withLock { $0[sql] }
    }

    func store(_ value: (sql: String, count: Int), for sql: String) {
        entries.withLock { entries in
            if entries.count >= limit { entries.removeAll(keepingCapacity: true) }
            entries[sql] = value
        }
    }
}

extension PostgresDatabase {
    /// Runs `CREATE DATABASE` or `DROP DATABASE` (which no transaction may
    /// hold) on the cluster at `url`: for the simulation's database per run.
    package static func clusterCommand(_ sql: String, at url: String) throws {
        let connection = try PostgresConnection(
            url: url, redactedURL: "the PostgreSQL cluster", timeouts: DatabaseTimeouts(), failureKind: .failure)
        defer { connection.finish() }
        try connection.command(sql)
    }
}
