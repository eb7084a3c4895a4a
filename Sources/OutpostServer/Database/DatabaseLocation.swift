/// Where the server keeps its data: a SQLite file path (the default) or a
/// PostgreSQL URL (`postgres://…` or `postgresql://…`).
public enum DatabaseLocation {
    /// The file `outpost serve` uses when given no `--database`.
    public static let defaultSQLitePath = "outpost-server.sqlite"

    public static func isPostgres(_ location: String) -> Bool {
        location.hasPrefix("postgres://") || location.hasPrefix("postgresql://")
    }

    /// Opens the database the location names.
    public static func open(
        _ location: String, poolSize: Int = 8, timeouts: DatabaseTimeouts = DatabaseTimeouts()
    ) throws -> any ServerDatabase {
        try open(location, poolSize: poolSize, timeouts: timeouts, writeConcurrency: .rowLocks)
    }

    /// Also takes the design of write concurrency (the scale-out benchmark's comparison).
    package static func open(
        _ location: String, poolSize: Int = 8, timeouts: DatabaseTimeouts = DatabaseTimeouts(),
        writeConcurrency: PostgresDatabase.WriteConcurrency
    ) throws -> any ServerDatabase {
        if isPostgres(location) {
            return try PostgresDatabase(
                url: location, poolSize: poolSize, timeouts: timeouts, writeConcurrency: writeConcurrency)
        }
        return try SQLiteServerDatabase(path: location)
    }
}
