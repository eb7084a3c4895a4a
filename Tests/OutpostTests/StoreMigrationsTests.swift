import Foundation
import Outpost
import OutpostCore
import OutpostSQLite
import OutpostTesting
import Testing

/// The named schema steps on their own, without a store around them.
@Suite("Named store migrations", .timeLimit(.minutes(1)))
struct StoreMigrationsTests {
  static func database(_ directory: TemporaryDirectory) throws -> SQLiteConnection {
    try SQLiteConnection(path: directory.path("device.sqlite"))
  }

  @Test func eachNumberedVersionStandsForTheStepsItRan() {
    let names = StoreMigrations.names
    #expect(names.count == 7)
    #expect(Set(names).count == names.count)
    #expect(StoreMigrations.appliedByLegacyVersion(0) == [])
    #expect(StoreMigrations.appliedByLegacyVersion(1) == ["1-base-tables"])
    #expect(StoreMigrations.appliedByLegacyVersion(2) == ["1-base-tables", "2-doubtful-creates"])
    #expect(StoreMigrations.appliedByLegacyVersion(3) == Array(names.prefix(3)))
    // Stores at 4 had their checks rebuilt at every opening already.
    #expect(StoreMigrations.appliedByLegacyVersion(4) == Array(names.prefix(5)))
    #expect(StoreMigrations.appliedByLegacyVersion(5) == Array(names.prefix(6)), "steps named after the numbered releases run")
    #expect(StoreMigrations.appliedByLegacyVersion(9) == Array(names.prefix(6)))
  }

  @Test func aNewDatabaseRunsAndRecordsEveryStepOnce() throws {
    let directory = try TemporaryDirectory()
    let connection = try Self.database(directory)
    defer { connection.close() }
    #expect(try StoreMigrations.pending(connection).map(\.name) == StoreMigrations.names)
    try connection.transaction { try StoreMigrations.migrate(connection) }
    #expect(try StoreMigrations.isRecorded(connection))
    #expect(try connection.query("SELECT name FROM store_migrations ORDER BY name") { $0.string(0) } == StoreMigrations.names)
    #expect(try StoreMigrations.pending(connection).isEmpty)
    #expect(try connection.first("PRAGMA user_version") { $0.int64(0) } == Int64(StoreMigrations.legacyVersion))
    let tables = Set(try connection.query("SELECT name FROM sqlite_schema WHERE type = 'table'") { $0.string(0) })
    #expect(StoreMigrations.fixedTables.isSubset(of: tables))
    // Running again finds nothing to do (a second CREATE TABLE would throw).
    try connection.transaction { try StoreMigrations.migrate(connection) }
  }

  @Test func aNumberedStoreRunsOnlyTheStepsItLacks() throws {
    let directory = try TemporaryDirectory()
    let connection = try Self.database(directory)
    defer { connection.close() }
    try connection.execute(ShippedStoreSchema.schema(version: 3, quickChecks: false))
    #expect(!(try StoreMigrations.isRecorded(connection)))
    #expect(try StoreMigrations.pending(connection).map(\.name) == Array(StoreMigrations.names.suffix(4)))
    try connection.transaction { try StoreMigrations.migrate(connection) }
    #expect(try connection.query("SELECT name FROM store_migrations ORDER BY name") { $0.string(0) } == StoreMigrations.names)
    let indexes = Set(try connection.query("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'outbox'") { $0.string(0) })
    #expect(indexes.isSuperset(of: ["outbox_by_record", "outbox_by_seq", "outbox_with_parents", "outbox_unknown_outcome", "outbox_failing"]))
  }

  @Test func aFailingStepLeavesNothingRecorded() throws {
    let directory = try TemporaryDirectory()
    let connection = try Self.database(directory)
    defer { connection.close() }
    // A table in the way of the first step: it fails, and nothing of it stays.
    try connection.execute("CREATE TABLE catalogs (x)")
    #expect(throws: SQLiteError.self) { try connection.transaction { try StoreMigrations.migrate(connection) } }
    #expect(!(try StoreMigrations.isRecorded(connection)))
    #expect(try connection.first("SELECT count(*) FROM sqlite_schema WHERE name = 'kv'") { $0.int64(0) } == 0)
  }

  @Test func theChecksStepLeavesQuickChecksAlone() throws {
    let directory = try TemporaryDirectory()
    let connection = try Self.database(directory)
    defer { connection.close() }
    try connection.execute(ShippedStoreSchema.schema(version: 3, quickChecks: true))
    try connection.run(
      "INSERT INTO outbox (entry, mutation_id, collection, record_uuid, op, queued_at) VALUES (9, 'm', 'people', 'u', 'create', 't')")
    let before = try connection.first("SELECT sql FROM sqlite_schema WHERE name = 'outbox'") { $0.string(0) }
    try connection.transaction { try StoreMigrations.migrate(connection) }
    #expect(try connection.first("SELECT sql FROM sqlite_schema WHERE name = 'outbox'") { $0.string(0) } == before)
    #expect(try connection.first("SELECT entry FROM outbox") { $0.int64(0) } == 9)
  }
}

/// Remaking a table with a new definition, on its own.
@Suite("Rebuilding a table", .timeLimit(.minutes(1)))
struct TableRebuildTests {
  @Test func rowsKeysAndIndexesAreKeptUnderTheNewDefinition() throws {
    let directory = try TemporaryDirectory()
    let connection = try SQLiteConnection(path: directory.path("t.sqlite"))
    defer { connection.close() }
    try connection.execute(
      """
      CREATE TABLE queue (n INTEGER PRIMARY KEY, kind TEXT CHECK (kind IN ('a', 'b', 'c')), gone TEXT);
      CREATE INDEX queue_by_kind ON queue (kind);
      INSERT INTO queue (n, kind, gone) VALUES (4, 'a', 'x'), (11, 'c', 'y');
      """)
    let definition = "CREATE TABLE queue (n INTEGER PRIMARY KEY, kind TEXT CHECK (kind = 'a' OR kind = 'b' OR kind = 'c'), extra TEXT)"
    #expect(try TableRebuild.definition(of: "queue", contains: "kind IN (", in: connection))
    try connection.transaction {
      try TableRebuild.rebuild("queue", create: definition, indexes: ["CREATE INDEX queue_by_kind ON queue (kind)"], in: connection)
    }
    #expect(!(try TableRebuild.definition(of: "queue", contains: "kind IN (", in: connection)))
    #expect(try connection.first("SELECT sql FROM sqlite_schema WHERE name = 'queue'") { $0.string(0) } == definition)
    #expect(try TableRebuild.columns(of: "queue", in: connection) == ["n", "kind", "extra"])
    #expect(try connection.query("SELECT n, kind FROM queue ORDER BY n") { "\($0.int64(0)) \($0.string(1))" } == ["4 a", "11 c"])
    #expect(try connection.first("SELECT count(*) FROM sqlite_schema WHERE name = 'queue_by_kind'") { $0.int64(0) } == 1)
    #expect(try connection.first("SELECT count(*) FROM sqlite_schema WHERE name LIKE '%legacy%'") { $0.int64(0) } == 0)
    // A new row numbers after the kept ones; the new check still refuses.
    try connection.run("INSERT INTO queue (kind) VALUES ('b')")
    #expect(try connection.first("SELECT max(n) FROM queue") { $0.int64(0) } == 12)
    #expect(throws: SQLiteError.self) { try connection.run("INSERT INTO queue (kind) VALUES ('z')") }
  }
}

/// A release before named steps wipes a store by emptying every table,
/// the record of steps included: the store still opens afterwards.
@Suite("A store whose record of steps was emptied", .timeLimit(.minutes(1)))
struct EmptiedMigrationRecordTests {
  @Test func itOpensWithItsStepsTakenFromItsVersion() async throws {
    let directory = try TemporaryDirectory()
    let path = directory.path("device.sqlite")
    try await LocalStore(path: path, collections: StoreFixture.collections).close()
    let raw = try SQLiteConnection(path: path)
    try raw.run("DELETE FROM store_migrations")
    raw.close()
    let store = try LocalStore(path: path, collections: StoreFixture.collections)
    try await store.create(Person(name: "Ada"))
    #expect(try await store.outboxEntries().count == 1)
    await store.close()
  }
}
