import Foundation
import Outpost
import OutpostCore
import OutpostSQLite
import OutpostTesting
import Testing

/// A device database written by the release before this one opens with
/// every record and queued change as it was, and its tables are rebuilt
/// once with the constraints SQLite checks quickly (`MembershipCheck`).
@Suite("Opening a store made by the previous release", .timeLimit(.minutes(2)))
struct StoreUpgradeTests {
  /// The previous release's schema, as that release wrote it: the same
  /// tables, with `IN` lists in their checks.
  static let previousSchema = """
    CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
    CREATE TABLE catalogs (
        uuid TEXT PRIMARY KEY, catalog TEXT NOT NULL, code TEXT NOT NULL, name TEXT NOT NULL, data TEXT NOT NULL,
        server_id INTEGER, server_version INTEGER, server_updated_at TEXT);
    CREATE INDEX catalogs_by_catalog ON catalogs (catalog, code);
    CREATE TABLE outbox (
        entry       INTEGER PRIMARY KEY,
        mutation_id TEXT NOT NULL,
        collection  TEXT NOT NULL,
        record_uuid TEXT NOT NULL,
        op          TEXT NOT NULL CHECK (op IN ('create', 'update', 'delete')),
        base_version INTEGER,
        data        TEXT,
        parents     TEXT NOT NULL DEFAULT '',
        seq         INTEGER,
        attempts    INTEGER NOT NULL DEFAULT 0,
        failures    INTEGER NOT NULL DEFAULT 0,
        unknown_outcome INTEGER NOT NULL DEFAULT 0,
        last_error  TEXT,
        queued_at   TEXT NOT NULL
    );
    CREATE INDEX outbox_by_record ON outbox (collection, record_uuid, entry);
    CREATE UNIQUE INDEX outbox_by_seq ON outbox (seq) WHERE seq IS NOT NULL;
    CREATE TABLE conflicts (
        id INTEGER PRIMARY KEY AUTOINCREMENT, collection TEXT NOT NULL, record_uuid TEXT NOT NULL,
        mutation_id TEXT NOT NULL, op TEXT NOT NULL, local_change TEXT, server_record TEXT, detected_at TEXT NOT NULL);
    CREATE TABLE resync_seen (collection TEXT NOT NULL, uuid TEXT NOT NULL, PRIMARY KEY (collection, uuid)) WITHOUT ROWID;
    CREATE TABLE doubtful_creates (
        collection TEXT NOT NULL, record_uuid TEXT NOT NULL, cancelled_after_seq INTEGER,
        PRIMARY KEY (collection, record_uuid)) WITHOUT ROWID;
    CREATE TABLE blobs (
        sha256         TEXT PRIMARY KEY,
        size           INTEGER NOT NULL,
        content_type   TEXT NOT NULL,
        upload         TEXT CHECK (upload IN ('waiting', 'uploading', 'uploaded', 'failed')),
        uploaded_bytes INTEGER NOT NULL DEFAULT 0,
        attempts       INTEGER NOT NULL DEFAULT 0,
        failures       INTEGER NOT NULL DEFAULT 0,
        last_error     TEXT,
        held           INTEGER NOT NULL DEFAULT 1,
        last_used      INTEGER NOT NULL DEFAULT 0,
        attached_at    TEXT
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS "people" (
        uuid TEXT PRIMARY KEY,
        server_id INTEGER,
        sync_state TEXT NOT NULL CHECK (sync_state IN ('synced', 'pending', 'sending', 'rejected')),
        server_updated_at TEXT,
        local_updated_at TEXT,
        rejection_json TEXT,
        base_version INTEGER,
        server_version INTEGER,
        on_server INTEGER NOT NULL DEFAULT 0,
        deleted INTEGER NOT NULL DEFAULT 0,
        owner TEXT,
        team TEXT,
        data TEXT NOT NULL,
        device_time TEXT
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS "people_rejected" ON "people" (sync_state) WHERE sync_state = 'rejected';
    CREATE INDEX IF NOT EXISTS "people_by_name" ON "people" (json_extract(data, '$.name'));
    PRAGMA user_version = 3;
    """

  static let synced = UUID(uuidString: "019ad000-0000-7000-8000-000000000001")!
  static let queued = UUID(uuidString: "019ad000-0000-7000-8000-000000000002")!

  /// A database as the previous release left it: one record the server
  /// holds, one created offline with its create queued as entry 7 (after
  /// entries that were settled, so the numbering is not 1).
  static func previousReleaseDatabase(at path: String) throws {
    let old = try SQLiteConnection(path: path)
    defer { old.close() }
    try old.execute(previousSchema)
    try old.run(
      """
      INSERT INTO people (uuid, server_id, sync_state, server_version, on_server, data)
      VALUES (?, 41, 'synced', 12, 1, '{"name":"Ada","section":1}')
      """, [.text(synced.wireText)])
    try old.run(
      """
      INSERT INTO people (uuid, sync_state, on_server, data, local_updated_at)
      VALUES (?, 'pending', 0, '{"name":"Grace"}', '2026-11-30T09:00:00.000Z')
      """, [.text(queued.wireText)])
    try old.run(
      """
      INSERT INTO outbox (entry, mutation_id, collection, record_uuid, op, data, queued_at)
      VALUES (7, '019ad000-0000-7000-8000-0000000000aa', 'people', ?, 'create', '{"name":"Grace"}', '2026-11-30T09:00:00.000Z')
      """, [.text(queued.wireText)])
  }

  static func schemaText(_ path: String) throws -> [String: String] {
    let connection = try SQLiteConnection(path: path, readOnly: true)
    defer { connection.close() }
    return Dictionary(
      uniqueKeysWithValues: try connection.query(
        "SELECT name, sql FROM sqlite_schema WHERE sql IS NOT NULL"
      ) {
        ($0.string(0), $0.string(1))
      })
  }

  @Test func recordsAndQueuedChangesSurviveAndTheChecksAreRebuilt() async throws {
    let directory = try TemporaryDirectory()
    let path = directory.path("device.sqlite")
    try Self.previousReleaseDatabase(at: path)
    #expect(try Self.schemaText(path)["outbox"]?.contains("op IN (") == true)

    let store = try LocalStore(path: path, collections: StoreFixture.collections)
    // Every record and queued change as it was.
    #expect(try await store.get(Person.self, Self.synced)?.value == Person(name: "Ada", section: 1))
    #expect(try await store.get(Person.self, Self.synced)?.syncState == .synced)
    #expect(try await store.get(Person.self, Self.queued)?.value == Person(name: "Grace"))
    let entries = try await store.outboxEntries()
    #expect(entries.map(\.entry) == [7])
    #expect(entries.first?.op == .create)
    #expect(entries.first?.record.uuid == Self.queued)

    // The queue still works on the rebuilt table: an edit folds into the
    // unsent create (found through the record index), a new record
    // numbers after it.
    try await store.update(Person.self, Self.queued) { $0.phone = "555-0101" }
    let added = try await store.create(Person(name: "Linus"))
    let after = try await store.outboxEntries()
    #expect(after.map(\.entry) == [7, 8])
    #expect(after.first?.data?["phone"] == .string("555-0101"))
    #expect(after.last?.record.uuid == added)
    await store.close()

    // Each table was rebuilt with the `OR` form, and kept its indexes.
    let schema = try Self.schemaText(path)
    for table in ["outbox", "blobs", "people"] {
      #expect(schema[table]?.contains(" IN (") == false, "\(table) still has an IN check")
    }
    #expect(schema["outbox"]?.contains("op = 'create' OR op = 'update' OR op = 'delete'") == true)
    for index in ["outbox_by_record", "outbox_by_seq", "people_rejected", "people_by_name"] {
      #expect(schema[index] != nil, "\(index) is missing")
    }

    // The checks still refuse what they refused.
    let raw = try SQLiteConnection(path: path)
    defer { raw.close() }
    #expect(throws: SQLiteError.self) {
      try raw.run(
        "UPDATE people SET sync_state = 'lost' WHERE uuid = ?", [.text(Self.synced.wireText)])
    }
    #expect(throws: SQLiteError.self) {
      try raw.run("UPDATE outbox SET op = 'merge' WHERE entry = 7")
    }
    #expect(throws: SQLiteError.self) {
      try raw.run(
        "INSERT INTO blobs (sha256, size, content_type, upload) VALUES ('ab', 1, 'image/png', 'sent')"
      )
    }
    #expect(try raw.first("PRAGMA integrity_check") { $0.string(0) } == "ok")

    // Opening again changes nothing more.
    let again = try LocalStore(path: path, collections: StoreFixture.collections)
    #expect(try await again.outboxEntries().map(\.entry) == [7, 8])
    await again.close()
    #expect(try Self.schemaText(path) == schema)
  }

  @Test func aNewStoreIsMadeWithTheQuickChecks() async throws {
    let directory = try TemporaryDirectory()
    let path = directory.path("device.sqlite")
    let store = try LocalStore(path: path, collections: StoreFixture.collections)
    await store.close()
    let schema = try Self.schemaText(path)
    for table in ["outbox", "blobs", "people", "visits"] {
      #expect(schema[table]?.contains(" IN (") == false, "\(table) has an IN check")
      #expect(schema[table]?.contains(" OR ") == true, "\(table) has no membership check")
    }
  }
}
