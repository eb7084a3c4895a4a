import Foundation
import Outpost
import OutpostCore
import OutpostSQLite
import OutpostTesting
import Testing

/// The schema as releases before named migrations shipped it: their
/// positional migrations (`PRAGMA user_version` = how many ran) and their
/// collection tables, written here as text so the new code cannot shape them.
enum ShippedStoreSchema {
  /// Checks of the releases before the quick `OR` form.
  static let opIn = "CHECK (op IN ('create', 'update', 'delete'))"
  static let opOr = "CHECK (op = 'create' OR op = 'update' OR op = 'delete')"
  static let uploadIn = "CHECK (upload IN ('waiting', 'uploading', 'uploaded', 'failed'))"
  static let uploadOr =
    "CHECK (upload = 'waiting' OR upload = 'uploading' OR upload = 'uploaded' OR upload = 'failed')"
  static let stateIn = "CHECK (sync_state IN ('synced', 'pending', 'sending', 'rejected'))"
  static let stateOr =
    "CHECK (sync_state = 'synced' OR sync_state = 'pending' OR sync_state = 'sending' OR sync_state = 'rejected')"

  /// Positional migration 1: kv, catalogs, outbox, conflicts, resync_seen.
  static func migration1(opCheck: String) -> String {
    """
    CREATE TABLE kv (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID;

    -- Read-only reference data: every catalog in one table.
    CREATE TABLE catalogs (
        uuid              TEXT PRIMARY KEY,
        catalog           TEXT NOT NULL,
        code              TEXT NOT NULL,
        name              TEXT NOT NULL,
        data              TEXT NOT NULL,
        server_id         INTEGER,
        server_version    INTEGER,
        server_updated_at TEXT
    );
    CREATE INDEX catalogs_by_catalog ON catalogs (catalog, code);

    CREATE TABLE outbox (
        entry       INTEGER PRIMARY KEY,
        mutation_id TEXT NOT NULL,
        collection  TEXT NOT NULL,
        record_uuid TEXT NOT NULL,
        op          TEXT NOT NULL \(opCheck),
        base_version INTEGER,
        data        TEXT,
        parents     TEXT NOT NULL DEFAULT '',
        seq         INTEGER,
        attempts    INTEGER NOT NULL DEFAULT 0,
        failures    INTEGER NOT NULL DEFAULT 0,
        -- 1 when the last send got no answer: the server may hold it
        -- ("checking result"); 0 when it surely did not.
        unknown_outcome INTEGER NOT NULL DEFAULT 0,
        last_error  TEXT,
        queued_at   TEXT NOT NULL
    );
    CREATE INDEX outbox_by_record ON outbox (collection, record_uuid, entry);
    -- Partial: a new entry (no seq yet) writes nothing to it.
    CREATE UNIQUE INDEX outbox_by_seq ON outbox (seq) WHERE seq IS NOT NULL;

    CREATE TABLE conflicts (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        collection    TEXT NOT NULL,
        record_uuid   TEXT NOT NULL,
        mutation_id   TEXT NOT NULL,
        op            TEXT NOT NULL,
        local_change  TEXT,
        server_record TEXT,
        detected_at   TEXT NOT NULL
    );

    CREATE TABLE resync_seen (
        collection TEXT NOT NULL,
        uuid       TEXT NOT NULL,
        PRIMARY KEY (collection, uuid)
    ) WITHOUT ROWID;
    """
  }

  /// Positional migration 2.
  static let migration2 = """
    CREATE TABLE doubtful_creates (
        collection          TEXT NOT NULL,
        record_uuid         TEXT NOT NULL,
        cancelled_after_seq INTEGER,
        PRIMARY KEY (collection, record_uuid)
    ) WITHOUT ROWID;
    """

  /// Positional migration 3.
  static func migration3(uploadCheck: String) -> String {
    """
    CREATE TABLE blobs (
        sha256         TEXT PRIMARY KEY,
        size           INTEGER NOT NULL,
        content_type   TEXT NOT NULL,
        upload         TEXT \(uploadCheck),
        uploaded_bytes INTEGER NOT NULL DEFAULT 0,
        attempts       INTEGER NOT NULL DEFAULT 0,
        failures       INTEGER NOT NULL DEFAULT 0,
        last_error     TEXT,
        held           INTEGER NOT NULL DEFAULT 1,
        last_used      INTEGER NOT NULL DEFAULT 0,
        attached_at    TEXT
    ) WITHOUT ROWID;
    """
  }

  /// Positional migration 4.
  static let migration4 = """
    CREATE INDEX outbox_with_parents ON outbox (entry) WHERE parents != '';
    CREATE INDEX outbox_unknown_outcome ON outbox (entry) WHERE unknown_outcome != 0;
    """

  /// Positional migration 5.
  static let migration5 = """
    CREATE INDEX outbox_failing ON outbox (entry) WHERE failures > 0;
    """

  /// A collection's table as a release made it: the oldest ones lacked
  /// `device_time` and indexed every unsynced record (`_by_state`).
  static func collectionTable(_ name: String, stateCheck: String, deviceTime: Bool, byState: Bool) -> String {
    """
    CREATE TABLE IF NOT EXISTS "\(name)" (
        uuid TEXT PRIMARY KEY,
        server_id INTEGER,
        sync_state TEXT NOT NULL \(stateCheck),
        server_updated_at TEXT,
        local_updated_at TEXT,
        rejection_json TEXT,
        base_version INTEGER,
        server_version INTEGER,
        on_server INTEGER NOT NULL DEFAULT 0,
        deleted INTEGER NOT NULL DEFAULT 0,
        owner TEXT,
        team TEXT,
        data TEXT NOT NULL\(deviceTime ? ",\n    device_time TEXT" : "")
    ) WITHOUT ROWID;
    """
      + (byState
        ? "CREATE INDEX IF NOT EXISTS \"\(name)_by_state\" ON \"\(name)\" (sync_state) WHERE sync_state != 'synced';"
        : "CREATE INDEX IF NOT EXISTS \"\(name)_rejected\" ON \"\(name)\" (sync_state) WHERE sync_state = 'rejected';")
  }

  /// The schema of a store at `version`; `quickChecks`: made after the
  /// `OR` checks shipped (every store at 4 or 5 was, a store at 3 may be).
  static func schema(version: Int, quickChecks: Bool) -> String {
    var parts: [String] = []
    if version >= 1 { parts.append(migration1(opCheck: quickChecks ? opOr : opIn)) }
    if version >= 2 { parts.append(migration2) }
    if version >= 3 { parts.append(migration3(uploadCheck: quickChecks ? uploadOr : uploadIn)) }
    if version >= 4 { parts.append(migration4) }
    if version >= 5 { parts.append(migration5) }
    if version >= 1 {
      let stateCheck = quickChecks ? stateOr : stateIn
      for name in ["people", "visits"] {
        parts.append(collectionTable(name, stateCheck: stateCheck, deviceTime: version >= 2, byState: version < 2))
      }
      parts.append("CREATE INDEX IF NOT EXISTS \"people_by_name\" ON \"people\" (json_extract(data, '$.name'));")
    }
    parts.append("PRAGMA user_version = \(version);")
    return parts.joined(separator: "\n")
  }
}

/// A store written by each earlier release opens with the new code: every
/// record, queued change and setting kept, and its schema the same as a
/// new store's.
@Suite("Opening a store of every earlier schema version", .timeLimit(.minutes(3)))
struct StoreVersionUpgradeTests {
  static let clientID = UUID(uuidString: "019ad000-0000-7000-8000-0000000000c1")!
  static let sent = UUID(uuidString: "019ad000-0000-7000-8000-000000000001")!
  static let queued = UUID(uuidString: "019ad000-0000-7000-8000-000000000002")!
  static let synced = UUID(uuidString: "019ad000-0000-7000-8000-000000000003")!
  static let blob = String(repeating: "ab", count: 32)

  /// (user_version, made with the quick checks)
  static let versions: [(Int, Bool)] = [(0, false), (1, false), (2, false), (3, false), (3, true), (4, true), (5, true)]

  /// A database as that release left it: a synced record, one whose update
  /// went out with seq 3 and was "sending" when the app died, one created
  /// offline (entry 7, never sent), a conflict, a catalog entry, and from
  /// the versions that had them a doubtful create and an attachment.
  static func oldDatabase(at path: String, version: Int, quickChecks: Bool) throws {
    let old = try SQLiteConnection(path: path)
    defer { old.close() }
    try old.execute(ShippedStoreSchema.schema(version: version, quickChecks: quickChecks))
    guard version >= 1 else { return }
    try old.run("INSERT INTO kv (key, value) VALUES ('client.id', ?)", [.text(clientID.wireText)])
    try old.run("INSERT INTO kv (key, value) VALUES ('outbox.last_seq', '3')")
    try old.run("INSERT INTO kv (key, value) VALUES ('meta.scope', 'full')")
    try old.run(
      """
      INSERT INTO people (uuid, server_id, sync_state, server_version, on_server, data)
      VALUES (?, 40, 'synced', 9, 1, '{"name":"Linus"}')
      """, [.text(synced.wireText)])
    try old.run(
      """
      INSERT INTO people (uuid, server_id, sync_state, server_version, base_version, on_server, data)
      VALUES (?, 41, 'sending', 12, 12, 1, '{"name":"Ada","section":2}')
      """, [.text(sent.wireText)])
    try old.run(
      """
      INSERT INTO outbox (entry, mutation_id, collection, record_uuid, op, base_version, data, seq, attempts, queued_at)
      VALUES (5, '019ad000-0000-7000-8000-0000000000a5', 'people', ?, 'update', 12, '{"section":2}', 3, 1,
              '2026-11-29T09:00:00.000Z')
      """, [.text(sent.wireText)])
    try old.run(
      """
      INSERT INTO people (uuid, sync_state, on_server, data, local_updated_at)
      VALUES (?, 'pending', 0, '{"name":"Grace"}', '2026-11-30T09:00:00.000Z')
      """, [.text(queued.wireText)])
    try old.run(
      """
      INSERT INTO outbox (entry, mutation_id, collection, record_uuid, op, data, queued_at)
      VALUES (7, '019ad000-0000-7000-8000-0000000000a7', 'people', ?, 'create', '{"name":"Grace"}',
              '2026-11-30T09:00:00.000Z')
      """, [.text(queued.wireText)])
    try old.run(
      """
      INSERT INTO conflicts (collection, record_uuid, mutation_id, op, local_change, detected_at)
      VALUES ('people', ?, '019ad000-0000-7000-8000-0000000000a1', 'update', '{"section":1}', '2026-11-28T09:00:00.000Z')
      """, [.text(synced.wireText)])
    try old.run(
      """
      INSERT INTO catalogs (uuid, catalog, code, name, data)
      VALUES ('019ad000-0000-7000-8000-0000000000d1', 'colors', 'red', 'Red', '{"catalog":"colors","code":"red","name":"Red"}')
      """)
    if version >= 2 {
      try old.run(
        "INSERT INTO doubtful_creates (collection, record_uuid, cancelled_after_seq) VALUES ('people', ?, NULL)",
        [.text(synced.wireText)])
    }
    if version >= 3 {
      try old.run(
        "INSERT INTO blobs (sha256, size, content_type, upload, held, last_used) VALUES (?, 10, 'image/png', 'waiting', 0, 4)",
        [.text(blob)])
    }
  }

  /// The schema as `sqlite_schema` holds it, comparable across ways of
  /// writing the same definition: comments, quotes, `IF NOT EXISTS` and
  /// spacing taken out.
  static func normalisedSchema(_ path: String) throws -> [String: String] {
    let connection = try SQLiteConnection(path: path, readOnly: true)
    defer { connection.close() }
    let rows = try connection.query("SELECT type, name, sql FROM sqlite_schema WHERE sql IS NOT NULL") {
      ("\($0.string(0)) \($0.string(1))", $0.string(2))
    }
    return Dictionary(uniqueKeysWithValues: rows.map { ($0.0, normalised($0.1)) })
  }

  static func normalised(_ sql: String) -> String {
    var text = sql.split(separator: "\n").map { line in
      line.range(of: "--").map { String(line[..<$0.lowerBound]) } ?? String(line)
    }.joined(separator: " ")
    text = text.replacingOccurrences(of: "\"", with: "").replacingOccurrences(of: "IF NOT EXISTS ", with: "")
    text = text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    return text.replacingOccurrences(of: "( ", with: "(").replacingOccurrences(of: " )", with: ")")
  }

  static func freshSchema() async throws -> [String: String] {
    let directory = try TemporaryDirectory()
    let path = directory.path("fresh.sqlite")
    let store = try LocalStore(path: path, collections: StoreFixture.collections)
    await store.close()
    return try normalisedSchema(path)
  }

  @Test(arguments: versions)
  func everyRowSurvivesAndTheSchemaIsANewStores(version: Int, quickChecks: Bool) async throws {
    let directory = try TemporaryDirectory()
    let path = directory.path("device.sqlite")
    try Self.oldDatabase(at: path, version: version, quickChecks: quickChecks)

    let store = try LocalStore(path: path, collections: StoreFixture.collections)
    if version >= 1 {
      #expect(store.clientID == Self.clientID)
      #expect(try await store.get(Person.self, Self.synced)?.syncState == .synced)
      // Nothing is in flight after opening: the sent update is pending again, with its seq.
      let sent = try await store.get(Person.self, Self.sent)
      #expect(sent?.value == Person(name: "Ada", section: 2))
      #expect(sent?.syncState == .pending)
      let entries = try await store.outboxEntries()
      #expect(entries.map(\.entry) == [5, 7])
      #expect(entries.map(\.seq) == [3, nil])
      #expect(entries.last?.op == .create)
      #expect(try await store.lastSeq() == 3)
      #expect(try await store.metadata("scope") == "full")
      #expect(try await store.conflicts().map(\.record.uuid) == [Self.synced])
      #expect(try await store.catalog("colors").map(\.code) == ["red"])
      #expect(try await store.integrityProblems() == [])

      // The queue goes on: an edit folds into the unsent create, a new
      // record numbers after it.
      try await store.update(Person.self, Self.queued) { $0.phone = "555-0101" }
      let added = try await store.create(Person(name: "Alan"))
      let after = try await store.outboxEntries()
      #expect(after.map(\.entry) == [5, 7, 8])
      #expect(after[1].data?["phone"] == .string("555-0101"))
      #expect(after.last?.record.uuid == added)
    } else {
      #expect(try await store.outboxEntries().isEmpty)
    }
    await store.close()

    let fresh = try await Self.freshSchema()
    #expect(try Self.normalisedSchema(path) == fresh)
    let raw = try SQLiteConnection(path: path)
    defer { raw.close() }
    #expect(try raw.query("SELECT name FROM store_migrations ORDER BY name") { $0.string(0) } == StoreMigrations.names)
    #expect(try raw.first("PRAGMA user_version") { $0.int64(0) } == 5)
    #expect(try raw.first("PRAGMA integrity_check") { $0.string(0) } == "ok")
    if version >= 2 {
      #expect(try raw.first("SELECT count(*) FROM doubtful_creates") { $0.int64(0) } == 1)
    }
    if version >= 3 {
      #expect(
        try raw.first("SELECT upload, held, last_used FROM blobs WHERE sha256 = ?", [.text(Self.blob)]) {
          "\($0.string(0)) \($0.int64(1)) \($0.int64(2))"
        } == "waiting 0 4")
    }
    // The checks refuse what a new store's refuse.
    #expect(throws: SQLiteError.self) {
      try raw.run("INSERT INTO people (uuid, sync_state, data) VALUES ('z', 'lost', '{}')")
    }
    #expect(throws: SQLiteError.self) {
      try raw.run(
        "INSERT INTO outbox (mutation_id, collection, record_uuid, op, queued_at) VALUES ('m', 'people', 'u', 'merge', 't')")
    }
    #expect(throws: SQLiteError.self) {
      try raw.run("INSERT INTO blobs (sha256, size, content_type, upload) VALUES ('cd', 1, 'image/png', 'sent')")
    }
  }

  /// Opening again changes nothing: the second opening writes nothing.
  @Test(arguments: [1, 3, 5])
  func aSecondOpeningChangesNothing(version: Int) async throws {
    let directory = try TemporaryDirectory()
    let path = directory.path("device.sqlite")
    try Self.oldDatabase(at: path, version: version, quickChecks: false)
    try await LocalStore(path: path, collections: StoreFixture.collections).close()
    let schema = try Self.normalisedSchema(path)
    let raw = try SQLiteConnection(path: path)
    let changes = try raw.first("PRAGMA data_version") { $0.int64(0) }
    let again = try LocalStore(path: path, collections: StoreFixture.collections)
    #expect(try await again.outboxEntries().map(\.entry) == [5, 7])
    await again.close()
    // Another connection's commit would have moved data_version.
    #expect(try raw.first("PRAGMA data_version") { $0.int64(0) } == changes)
    raw.close()
    #expect(try Self.normalisedSchema(path) == schema)
  }
}
