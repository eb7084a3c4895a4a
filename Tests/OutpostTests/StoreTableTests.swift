import Foundation
import Outpost
import OutpostCore
import OutpostSQLite
import OutpostTesting
import Testing

/// Each table owner on its own: a bare database with only its table, its
/// statements run directly.
@Suite("Store tables, each on its own", .timeLimit(.minutes(1)))
struct StoreTableTests {
  static func database(_ directory: TemporaryDirectory) throws -> SQLiteConnection {
    try SQLiteConnection(path: directory.path("tables.sqlite"))
  }

  static let person = RecordReference(collection: "people", uuid: UUID(uuidString: "019ad000-0000-7000-8000-000000000001")!)
  static let other = RecordReference(collection: "people", uuid: UUID(uuidString: "019ad000-0000-7000-8000-000000000002")!)

  @Test func keyValuesAreSetReplacedListedAndRemoved() throws {
    let directory = try TemporaryDirectory()
    let connection = try Self.database(directory)
    defer { connection.close() }
    try KeyValueTable.create(in: connection)
    let kv = KeyValueTable(connection: connection)
    #expect(try kv.value("pull.cursor") == nil)
    try kv.set("pull.cursor", "a")
    try kv.set("pull.cursor", "b")
    try kv.insert("pull.at", "t")
    try kv.insert("store.sealed", "1")
    #expect(try kv.value("pull.cursor") == "b")
    #expect(try kv.contains("pull.at"))
    #expect(throws: SQLiteError.self) { try kv.insert("pull.at", "again") }
    #expect(try kv.values(prefix: "pull.") == ["pull.cursor": "b", "pull.at": "t"])
    try kv.remove("pull.at")
    #expect(try !kv.contains("pull.at"))
    try kv.removeAll(except: "store.sealed")
    #expect(try kv.values(prefix: "") == ["store.sealed": "1"])
  }

  @Test func catalogEntriesAreReplacedByUUIDAndListedByCode() throws {
    let directory = try TemporaryDirectory()
    let connection = try Self.database(directory)
    defer { connection.close() }
    try CatalogTable.create(in: connection)
    let catalogs = CatalogTable(connection: connection)
    let red: JSONObject = ["catalog": "colors", "code": "red", "name": "Red"]
    let blue: JSONObject = ["catalog": "colors", "code": "blue", "name": "Blue"]
    try catalogs.upsert(uuid: "u1", data: red, text: try red.jsonText(), serverID: 1, version: 1, updatedAt: "t1")
    try catalogs.upsert(uuid: "u2", data: blue, text: try blue.jsonText(), serverID: 2, version: 1, updatedAt: "t1")
    try catalogs.upsert(uuid: "u1", data: red, text: try red.jsonText(), serverID: 1, version: 2, updatedAt: "t2")
    #expect(try catalogs.entries("colors").map(\.code) == ["blue", "red"])
    #expect(try catalogs.count() == 2)
    try catalogs.remove(uuid: "u2")
    #expect(try catalogs.entries("colors").map(\.name) == ["Red"])
  }

  @Test func outboxEntriesAreNumberedGivenBackAndNeverRewrittenOnceSent() throws {
    let directory = try TemporaryDirectory()
    let connection = try Self.database(directory)
    defer { connection.close() }
    try OutboxTable.create(in: connection)
    let outbox = OutboxTable(connection: connection)
    func queue(_ record: RecordReference, _ op: MutationOp) throws {
      try outbox.insert(
        mutationID: UUID(), record: record, op: op, baseVersion: nil, data: .text("{}"), parents: "", queuedAt: "t")
    }
    try queue(Self.person, .create)
    try queue(Self.other, .update)
    try queue(Self.person, .update)
    #expect(try outbox.count() == 3)
    #expect(try outbox.hasCreate(of: Self.person))
    #expect(try !outbox.hasCreate(of: Self.other))

    try outbox.number([1, 3], from: 10)
    #expect(try outbox.sentEntries() == [1, 3])
    #expect(try outbox.holds(seq: 11))
    // A sent entry keeps its content; a never-sent one takes the new.
    try outbox.rewrite(3, mutationID: UUID(), op: .delete, baseVersion: nil, data: .null, parents: "", queuedAt: "t2")
    try outbox.rewrite(2, mutationID: UUID(), op: .delete, baseVersion: 4, data: .null, parents: "", queuedAt: "t2")
    let ops = try connection.query("SELECT op FROM outbox ORDER BY entry") { $0.string(0) }
    #expect(ops == ["create", "delete", "update"])

    try outbox.renumber(3, from: 11, to: 12)
    #expect(try outbox.holds(seq: 12) && !(try outbox.holds(seq: 11)))
    try outbox.clearSeqs(10...12)
    #expect(try outbox.sentEntries().isEmpty)

    try outbox.noteFailure(2, consumesBudget: true, message: "refused", outcomeUnknown: true)
    #expect(try connection.first("SELECT failures, unknown_outcome, last_error FROM outbox WHERE entry = 2") {
      "\($0.int64(0)) \($0.int64(1)) \($0.string(2))"
    } == "1 1 refused")

    try outbox.removeUnsent(of: Self.person)
    #expect(try outbox.count() == 1)
    // A new entry numbers after every live one.
    try queue(Self.person, .create)
    #expect(try connection.first("SELECT max(entry) FROM outbox") { $0.int64(0) } == 3)
    try outbox.removeAll(of: Self.other)
    try outbox.remove(3)
    #expect(try outbox.count() == 0)
  }

  @Test func theOutboxRefusesAnUnknownOperation() throws {
    let directory = try TemporaryDirectory()
    let connection = try Self.database(directory)
    defer { connection.close() }
    try OutboxTable.create(in: connection)
    #expect(throws: SQLiteError.self) {
      try connection.run(
        "INSERT INTO outbox (mutation_id, collection, record_uuid, op, queued_at) VALUES ('m', 'people', 'u', 'merge', 't')")
    }
  }

  @Test func blobsGoFromWaitingToUploadedOrFailedAndTheLeastUsedIsEvictedFirst() throws {
    let directory = try TemporaryDirectory()
    let connection = try Self.database(directory)
    defer { connection.close() }
    try BlobTable.create(in: connection)
    let blobs = BlobTable(connection: connection)
    let photo = AttachedFile(sha256: String(repeating: "a", count: 64), size: 100, contentType: "image/jpeg")!
    let scan = AttachedFile(sha256: String(repeating: "b", count: 64), size: 50, contentType: "image/png")!
    try blobs.attach(photo, use: 2, now: "t")
    try blobs.attach(scan, use: 1, now: "t")
    #expect(try blobs.notUploaded() == [photo.sha256, scan.sha256])

    try blobs.noteProgress(photo.sha256, bytes: 40)
    try blobs.markUploaded(photo.sha256)
    // Progress after the end changes nothing.
    try blobs.noteProgress(photo.sha256, bytes: 10)
    #expect(try connection.first("SELECT upload, uploaded_bytes FROM blobs WHERE size = 100") {
      "\($0.string(0)) \($0.int64(1))"
    } == "uploaded 100")

    try blobs.countFailure(scan.sha256, reason: "bad hash", budget: 2)
    #expect(try blobs.anyNotUploaded())
    try blobs.countFailure(scan.sha256, reason: "bad hash", budget: 2)
    #expect(try connection.first("SELECT upload FROM blobs WHERE size = 50") { $0.string(0) } == "failed")
    // Attached again: this device's to upload anew.
    try blobs.attach(scan, use: 3, now: "t2")
    #expect(try connection.first("SELECT upload, failures FROM blobs WHERE size = 50") {
      "\($0.string(0)) \($0.int64(1))"
    } == "waiting 0")

    try blobs.markUploaded(scan.sha256)
    #expect(try blobs.evictable().map(\.sha) == [photo.sha256, scan.sha256])
    #expect(try blobs.heldBytes() == 150)
    try blobs.markNotHeld(photo.sha256)
    #expect(try blobs.heldBytes() == 50)
    #expect(throws: SQLiteError.self) {
      try connection.run("UPDATE blobs SET upload = 'sent'")
    }
  }

  @Test func doubtfulCreatesAreMarkedCancelledAndForgiven() throws {
    let directory = try TemporaryDirectory()
    let connection = try Self.database(directory)
    defer { connection.close() }
    try OutboxTable.create(in: connection)
    try DoubtfulCreateTable.create(in: connection)
    let doubts = DoubtfulCreateTable(connection: connection)
    #expect(try doubts.isEmpty())
    try doubts.markCancelled(Self.person, after: 5)
    try doubts.markCancelled(Self.other, after: 9)
    #expect(try doubts.cancelled().count == 2)
    // Seqs above 6 processed as new prove nothing of the create cancelled
    // after 5: seq 6 itself may never have reached the server.
    try doubts.forgetCancelled(answeredNew: [7, 8])
    #expect(try doubts.cancelled().count == 2)
    // Seq 6 processed as new: the first was never sent by anyone.
    try doubts.forgetCancelled(answeredNew: [6, 7])
    #expect(try doubts.cancelled().map(\.uuid) == [Self.other.uuid.wireText])
    try doubts.markMayBeOnServer(Self.other)
    #expect(try doubts.cancelled().isEmpty)
    #expect(try doubts.takeMayBeOnServer(Self.other))
    #expect(try !doubts.takeMayBeOnServer(Self.other))

    try OutboxTable(connection: connection).insert(
      mutationID: UUID(), record: Self.person, op: .create, baseVersion: nil, data: .text("{}"), parents: "", queuedAt: "t")
    try doubts.markUnsentCreatesMayBeOnServer()
    #expect(try doubts.takeMayBeOnServer(Self.person))
    #expect(try doubts.isEmpty())
  }

  @Test func aRecordTableIsMadeAndAnOldOneBroughtUpToDateWithItsRows() throws {
    let directory = try TemporaryDirectory()
    let connection = try Self.database(directory)
    defer { connection.close() }
    try connection.execute(
      ShippedStoreSchema.collectionTable("people", stateCheck: ShippedStoreSchema.stateIn, deviceTime: false, byState: true))
    try connection.run(
      "INSERT INTO people (uuid, sync_state, data) VALUES (?, 'sending', '{}')", [.text(Self.person.uuid.wireText)])
    try OutboxTable.create(in: connection)
    try OutboxTable(connection: connection).insert(
      mutationID: UUID(), record: Self.person, op: .create, baseVersion: nil, data: .text("{}"), parents: "", queuedAt: "t")

    let people = RecordTable("people", connection)
    try people.ensure(indexedFields: ["name"], sealed: false)
    let sql = try connection.first("SELECT sql FROM sqlite_schema WHERE name = 'people'") { $0.string(0) } ?? ""
    #expect(!sql.contains(" IN ("))
    #expect(try TableRebuild.columns(of: "people", in: connection).last == "device_time")
    let indexes = Set(try connection.query("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'people' AND sql IS NOT NULL") { $0.string(0) })
    #expect(indexes == ["people_rejected", "people_by_name", "people_uuid_key"])

    #expect(try people.hasSending())
    try people.resetSending()
    #expect(try !people.hasSending())
    try people.setState(Self.person.uuid, .rejected)
    #expect(try people.countRejected() == 1)
    #expect(try people.countLive() == 1)
    // Sealed payloads take the field index away.
    try people.ensure(indexedFields: ["name"], sealed: true)
    #expect(try connection.first("SELECT count(*) FROM sqlite_schema WHERE name = 'people_by_name'") { $0.int64(0) } == 0)
  }

  @Test func aTableLackingControlColumnsIsRefused() throws {
    let directory = try TemporaryDirectory()
    let connection = try Self.database(directory)
    defer { connection.close() }
    try connection.execute("CREATE TABLE people (uuid TEXT PRIMARY KEY, data TEXT)")
    #expect(throws: StoreError.self) { try RecordTable("people", connection).ensure(indexedFields: [], sealed: false) }
  }
}
