import Foundation
import Outpost
import OutpostCore
@testable import OutpostServer
import OutpostSimulation
import OutpostSQLite
import OutpostTesting
import Testing

/// Pages from the server commit without a flush: a power loss may take the
/// last ones together with their cursor (the device is back at an earlier
/// consistent state and pulls them again), never anything the device
/// itself wrote, and never a page a later synced commit came after.
@Suite("Pages committed without a flush", .timeLimit(.minutes(3)))
struct DeferredPageFlushTests {
    // MARK: The connection

    static func notes(_ connection: SQLiteConnection) throws -> [String] {
        try connection.query("SELECT text FROM notes ORDER BY rowid") { $0.string(0) }
    }

    /// Loses the power, then opens the file again on what the disk kept.
    static func afterPowerLoss(_ connection: SQLiteConnection, _ disk: FaultyDisk) throws -> SQLiteConnection {
        disk.losePower()
        connection.close()
        disk.powerOn()
        let reopened = try SQLiteConnection(path: connection.path, vfs: disk.name)
        #expect(try reopened.first("PRAGMA integrity_check") { $0.string(0) } == "ok")
        return reopened
    }

    static func notesTable(_ directory: TemporaryDirectory, _ disk: FaultyDisk) throws -> SQLiteConnection {
        let connection = try SQLiteConnection(path: directory.path("notes.sqlite"), vfs: disk.name)
        try connection.execute("CREATE TABLE notes (text TEXT)")
        try connection.transaction { _ = try connection.run("INSERT INTO notes VALUES ('synced')") }
        return connection
    }

    @Test func aDeferredCommitIsLostWholeToAPowerLossAndTheLevelComesBack() throws {
        let directory = try TemporaryDirectory()
        let disk = try FaultyDisk(keepingOnlySynced: [])
        let connection = try Self.notesTable(directory, disk)
        try connection.transaction(flush: .deferred) {
            _ = try connection.run("INSERT INTO notes VALUES ('page')")
            _ = try connection.run("INSERT INTO notes VALUES ('its cursor')")
        }
        #expect(try Self.notes(connection) == ["synced", "page", "its cursor"])
        #expect(try connection.first("PRAGMA synchronous") { $0.int64(0) } == 2, "FULL again after the transaction")
        let reopened = try Self.afterPowerLoss(connection, disk)
        defer { reopened.close() }
        #expect(try Self.notes(reopened) == ["synced"])
    }

    @Test func aSyncedCommitAfterADeferredOneKeepsBoth() throws {
        let directory = try TemporaryDirectory()
        let disk = try FaultyDisk(keepingOnlySynced: [])
        let connection = try Self.notesTable(directory, disk)
        try connection.transaction(flush: .deferred) { _ = try connection.run("INSERT INTO notes VALUES ('page')") }
        // Outside any transaction, as a store's autocommit writes are.
        _ = try connection.run("INSERT INTO notes VALUES ('local write')")
        let reopened = try Self.afterPowerLoss(connection, disk)
        defer { reopened.close() }
        #expect(try Self.notes(reopened) == ["synced", "page", "local write"])
    }

    @Test func aDeferredTransactionThatAsksForTheFlushIsKept() throws {
        let directory = try TemporaryDirectory()
        let disk = try FaultyDisk(keepingOnlySynced: [])
        let connection = try Self.notesTable(directory, disk)
        try connection.transaction(flush: .deferred) {
            _ = try connection.run("INSERT INTO notes VALUES ('queued here')")
            connection.flushThisCommit()
        }
        // Outside a transaction it means nothing, and the next deferred one is deferred again.
        connection.flushThisCommit()
        try connection.transaction(flush: .deferred) { _ = try connection.run("INSERT INTO notes VALUES ('page')") }
        let reopened = try Self.afterPowerLoss(connection, disk)
        defer { reopened.close() }
        #expect(try Self.notes(reopened) == ["synced", "queued here"])
    }

    @Test func aDeferredTransactionThatThrowsChangesNothingAndLeavesCommitsSynced() throws {
        let directory = try TemporaryDirectory()
        let disk = try FaultyDisk(keepingOnlySynced: [])
        let connection = try Self.notesTable(directory, disk)
        struct Refused: Error {}
        #expect(throws: Refused.self) {
            try connection.transaction(flush: .deferred) {
                _ = try connection.run("INSERT INTO notes VALUES ('half a page')")
                throw Refused()
            }
        }
        try connection.transaction { _ = try connection.run("INSERT INTO notes VALUES ('durable')") }
        let reopened = try Self.afterPowerLoss(connection, disk)
        defer { reopened.close() }
        #expect(try Self.notes(reopened) == ["synced", "durable"])
    }

    // MARK: A device and its server

    static let collections = [CollectionDescriptor(name: "people", indexedFields: ["name"])]

    /// A server in process, a device engine on a disk that can lose its
    /// power, and another device's pushes.
    final class Setup: @unchecked Sendable {
        // @unchecked Sendable: used by one test at a time.
        let directory: TemporaryDirectory
        let server: SyncServer
        let transport: ServerTransport
        let disk: FaultyDisk
        let path: String
        let deviceToken: String
        let writerToken: String
        let writer = UUID()
        var seq: Int64 = 0
        private(set) var store: LocalStore
        private(set) var engine: SyncEngine

        init() throws {
            directory = try TemporaryDirectory()
            server = try SyncServer(database: try SQLiteServerDatabase(path: directory.path("server.sqlite")), config: try ServerConfig())
            transport = ServerTransport(server: server)
            path = directory.path("device.sqlite")
            disk = try FaultyDisk(keepingOnlySynced: [path + ".blobs"])
            deviceToken = try server.tokens.issue(user: "c-1", role: .coordinator, team: "t-1", ttl: nil)
            writerToken = try server.tokens.issue(user: "f-1", role: .field, team: "t-1", ttl: nil)
            (store, engine) = try Self.open(path, disk, transport, deviceToken)
        }

        static func open(_ path: String, _ disk: FaultyDisk, _ transport: ServerTransport, _ token: String) throws -> (LocalStore, SyncEngine) {
            let store = try LocalStore(path: path, collections: DeferredPageFlushTests.collections, vfs: disk.name)
            var options = SyncOptions()
            options.liveUpdates = false
            options.periodicInterval = nil
            return (store, SyncEngine(store: store, transport: transport, token: token, options: options, pathMonitor: nil, seed: 1))
        }

        /// Another device creates `count` people; their uuids.
        func othersCreate(_ count: Int) throws -> [UUID] {
            var mutations: [Mutation] = []
            for _ in 0..<count {
                seq += 1
                mutations.append(
                    Mutation(seq: seq, id: UUID(), op: .create, collection: "people", uuid: UUID(), baseVersion: nil,
                        data: ["name": .string("Person \(seq)")]))
            }
            _ = try push(mutations)
            return mutations.map(\.uuid)
        }

        /// Another device renames a person, from the version it last saw.
        func othersRename(_ uuid: UUID, from version: Int64, to name: String) throws {
            seq += 1
            let answer = try push([
                Mutation(seq: seq, id: UUID(), op: .update, collection: "people", uuid: uuid, baseVersion: version,
                    data: ["name": .string(name)])
            ])
            try #require(answer.results.first?.status == .applied, "the rename was not applied: \(answer.results)")
        }

        func push(_ mutations: [Mutation]) throws -> PushResponse {
            let body = try WireCoding.encode(PushRequest(clientID: writer, mutations: mutations))
            let answer = server.handle(
                HTTPRequest(method: "POST", target: "/v1/push",
                    headers: ["Authorization": "Bearer \(writerToken)", "Content-Type": "application/json"], body: body))
            try #require(answer.status == 200, "the push answered \(answer.status)")
            return try WireCoding.decode(PushResponse.self, from: Data(answer.body))
        }

        /// The page a pull from the device's cursor brings now (what a live event carries).
        func nextPage() async throws -> PullResponse {
            let cursor = try #require(try await cursor())
            let answer = server.handle(
                HTTPRequest(method: "GET", target: "/v1/pull?collections=catalogs,people&cursor=\(cursor.rawValue)",
                    headers: ["Authorization": "Bearer \(deviceToken)"], body: Data()))
            try #require(answer.status == 200, "the pull answered \(answer.status): \(String(decoding: answer.body, as: UTF8.self))")
            return try WireCoding.decode(PullResponse.self, from: Data(answer.body))
        }

        func cursor() async throws -> PullCursor? {
            try await store.pullState(collections: store.syncedCollections).cursor
        }

        func people() async throws -> Set<UUID> {
            Set(try await store.query(RecordQuery("people")).map(\.uuid))
        }

        /// The power goes now; the app starts again on what the disk kept.
        func losePowerAndRestart() async throws {
            disk.losePower()
            await engine.stop()
            await store.close()
            disk.powerOn()
            (store, engine) = try Self.open(path, disk, transport, deviceToken)
            #expect(try await store.integrityProblems().isEmpty, "the store is consistent after the power loss")
        }
    }

    @Test func aLivePageLostToAPowerLossLeavesTheEarlierCursorAndThePullBringsItAgain() async throws {
        let setup = try Setup()
        let first = try setup.othersCreate(3)
        _ = try await setup.engine.sync()
        let before = try #require(try await setup.cursor())
        #expect(try await setup.people() == Set(first))

        let second = try setup.othersCreate(2)
        let page = try await setup.nextPage()
        #expect(page.changes.count == 2)
        try await setup.store.applyPull(page, collections: setup.store.syncedCollections)
        #expect(try await setup.cursor() == page.cursor)
        try await setup.losePowerAndRestart()

        #expect(try await setup.cursor() == before, "the page went with its cursor")
        #expect(try await setup.people() == Set(first))
        _ = try await setup.engine.sync()
        #expect(try await setup.people() == Set(first + second), "the next sync brought the page again")
        #expect(try await setup.cursor() == page.cursor)
        await setup.store.close()
    }

    @Test func aPullsPagesLostToAPowerLossArePulledAgain() async throws {
        let setup = try Setup()
        let first = try setup.othersCreate(3)
        _ = try await setup.engine.sync()
        let before = try #require(try await setup.cursor())
        let second = try setup.othersCreate(4)
        _ = try await setup.engine.sync()
        #expect(try await setup.people() == Set(first + second))
        try await setup.losePowerAndRestart()
        #expect(try await setup.cursor() == before)
        #expect(try await setup.people() == Set(first))
        _ = try await setup.engine.sync()
        #expect(try await setup.people() == Set(first + second))
        await setup.store.close()
    }

    @Test func aLocalWriteAfterAPageKeepsBothThroughAPowerLoss() async throws {
        let setup = try Setup()
        _ = try setup.othersCreate(3)
        _ = try await setup.engine.sync()
        _ = try setup.othersCreate(2)
        let page = try await setup.nextPage()
        try await setup.store.applyPull(page, collections: setup.store.syncedCollections)
        let mine = try await setup.store.create(in: "people", ["name": "Written here"])
        let held = try await setup.people()
        try await setup.losePowerAndRestart()
        #expect(try await setup.people() == held, "the page and the local write are both kept")
        #expect(held.contains(mine) && held.count == 6)
        #expect(try await setup.cursor() == page.cursor)
        #expect(try await setup.store.outboxSummary().total == 1, "the write is still queued")
        await setup.store.close()
    }

    @Test func aPageThatKeepsALocalEditIsSynced() async throws {
        let setup = try Setup()
        let first = try setup.othersCreate(1)
        _ = try await setup.engine.sync()
        let uuid = try #require(first.first)
        // Edited here, not pushed yet; the server then sends a newer copy.
        try await setup.store.update(in: "people", uuid, patch: ["name": "Edited here"])
        let version = try #require(try await setup.store.get(in: "people", uuid)?.serverVersion)
        try setup.othersRename(uuid, from: version, to: "Edited there")
        let page = try await setup.nextPage()
        let result = try await setup.store.applyPull(page, collections: setup.store.syncedCollections)
        #expect(result.keptLocal == 1, "\(result)")
        try await setup.losePowerAndRestart()
        #expect(try await setup.cursor() == page.cursor, "a page that kept a local edit was synced with its cursor")
        await setup.store.close()
    }
}
