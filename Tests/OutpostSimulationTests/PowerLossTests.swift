import Foundation
import Outpost
import OutpostCore
@testable import OutpostServer
import OutpostSimulation
import OutpostSQLite
import OutpostTesting
import Testing

/// A power loss keeps only what was synced. The disk model first (a write
/// not synced is gone, a synced one stays, for databases and for files),
/// then what Outpost promises on it: every local write that returned, every
/// push answered `applied`, every blob called complete survives; and with
/// commits that are not synced, the same power loss loses them (the fault
/// bites, so the tests above can fail).
@Suite("Power loss", .timeLimit(.minutes(3)))
struct PowerLossTests {
    // MARK: The model on its own

    @Test func aDatabaseKeepsTheSyncedCommitAndLosesTheOneNeverSynced() throws {
        let directory = try TemporaryDirectory()
        let disk = try FaultyDisk(keepingOnlySynced: [])
        let path = directory.path("model.sqlite")
        let connection = try SQLiteConnection(path: path, vfs: disk.name, durability: .powerLoss)
        try connection.execute("CREATE TABLE notes (text TEXT)")
        _ = try connection.run("INSERT INTO notes VALUES ('synced')")
        // The same connection, its commits no longer synced.
        try connection.execute("PRAGMA synchronous = OFF")
        _ = try connection.run("INSERT INTO notes VALUES ('only in memory')")
        #expect(try connection.query("SELECT text FROM notes") { $0.string(0) } == ["synced", "only in memory"])

        disk.losePower()
        #expect(throws: SQLiteError.self, "a handle from before the loss is dead") {
            try connection.run("INSERT INTO notes VALUES ('after the loss')")
        }
        connection.close()
        #expect(disk.isPoweredOff)
        disk.powerOn()
        let reopened = try SQLiteConnection(path: path, vfs: disk.name)
        defer { reopened.close() }
        #expect(try reopened.query("SELECT text FROM notes") { $0.string(0) } == ["synced"])
        #expect(try reopened.first("PRAGMA integrity_check") { $0.string(0) } == "ok")
        #expect(disk.powerLosses == 1)
    }

    @Test func filesKeepWhatWasSyncedAndNamesOnlyOnceTheirFolderWas() throws {
        let directory = try TemporaryDirectory()
        let folder = directory.path("files")
        let disk = try FaultyDisk(keepingOnlySynced: [folder])
        // Synced, and its folder synced: its bytes and name survive.
        #expect(FileManager.default.createFile(atPath: folder + "/overwritten", contents: Data("first".utf8)))
        try DurableFiles.syncFile(atPath: folder + "/overwritten")
        // A folder made through the seam, and a file written whole into it.
        try DurableFiles.createDirectory(folder + "/sub")
        try DurableFiles.write(Data("deep".utf8), to: folder + "/sub/file")
        // Written whole through the seam (which syncs the folder last): survives.
        try DurableFiles.write(Data("kept".utf8), to: folder + "/durable")

        // After the folder's last sync: overwritten in place without a sync
        // (the synced bytes come back), written and never synced (gone), and
        // synced but never named by a folder sync (gone).
        try Data("second".utf8).write(to: URL(fileURLWithPath: folder + "/overwritten"))
        #expect(FileManager.default.createFile(atPath: folder + "/cached", contents: Data("lost".utf8)))
        let descriptor = open(folder + "/unnamed", O_WRONLY | O_CREAT, 0o600)
        #expect(descriptor >= 0)
        try DurableFiles.sync(descriptor: descriptor, path: folder + "/unnamed")
        close(descriptor)

        disk.losePower()
        disk.powerOn()
        let names = Set((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
        #expect(names == ["durable", "overwritten", "sub"])
        #expect(FileManager.default.contents(atPath: folder + "/durable") == Data("kept".utf8))
        #expect(FileManager.default.contents(atPath: folder + "/overwritten") == Data("first".utf8))
        #expect(FileManager.default.contents(atPath: folder + "/sub/file") == Data("deep".utf8))
    }

    // MARK: The device

    static let collections = [CollectionDescriptor(name: "people", indexedFields: ["name"])]

    /// A store on a disk that can lose its power, its photos' folder included.
    static func deviceDisk(_ path: String) throws -> FaultyDisk {
        try FaultyDisk(keepingOnlySynced: [path + ".blobs"])
    }

    @Test func everyLocalWriteThatReturnedSurvivesAPowerLossWithItsPhoto() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let disk = try Self.deviceDisk(path)
        var store = try LocalStore(path: path, collections: Self.collections, vfs: disk.name)
        var written: Set<UUID> = []
        for index in 0..<20 { written.insert(try await store.create(in: "people", ["name": .string("Person \(index)")])) }
        let photo = Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let withPhoto = try await store.write { transaction in
            let attachment = try transaction.attach(photo, contentType: "image/jpeg")
            return try transaction.create(in: "people", ["name": "With a photo", "photo": attachment.jsonValue])
        }
        written.insert(withPhoto)

        // The power goes the instant the last write returned.
        disk.losePower()
        await store.close()
        disk.powerOn()
        store = try LocalStore(path: path, collections: Self.collections, vfs: disk.name)
        let kept = Set(try await store.query(RecordQuery("people")).map(\.uuid))
        #expect(kept == written, "every write that returned is there")
        #expect(try await store.outboxSummary().total == 21, "and queued to be sent")
        let record = try #require(try await store.get(in: "people", withPhoto))
        let attachment = try #require(record.value["photo"].flatMap(AttachedFile.init))
        #expect(try await store.attachmentBytes(attachment, from: 0, count: photo.count) == photo)
        await store.close()
    }

    @Test func withCommitsThatAreNotSyncedAPowerLossTakesTheWrites() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let disk = try Self.deviceDisk(path)
        // Made and closed (closing checkpoints and syncs), then written in the crash-only mode.
        await (try LocalStore(path: path, collections: Self.collections, vfs: disk.name)).close()
        var store = try LocalStore(path: path, collections: Self.collections, vfs: disk.name, durability: .processCrash)
        for index in 0..<20 { _ = try await store.create(in: "people", ["name": .string("Person \(index)")]) }
        disk.losePower()
        await store.close()
        disk.powerOn()
        store = try LocalStore(path: path, collections: Self.collections, vfs: disk.name)
        let kept = try await store.query(RecordQuery("people")).count
        #expect(kept < 20, "the model drops unsynced commits (kept \(kept) of 20)")
        await store.close()
    }

    // MARK: The server

    static func request(_ method: String, _ target: String, token: String, body: Data = Data(), headers: [String: String] = [:])
        -> HTTPRequest
    {
        var all = ["Authorization": "Bearer \(token)", "Content-Type": "application/json"]
        all.merge(headers) { $1 }
        return HTTPRequest(method: method, target: target, headers: all, body: body)
    }

    /// A push of `count` creates from one client, with seqs after `seq`.
    static func push(_ count: Int, client: UUID, after seq: inout Int64) throws -> (body: Data, uuids: [UUID]) {
        var mutations: [Mutation] = []
        for _ in 0..<count {
            seq += 1
            mutations.append(
                Mutation(seq: seq, id: UUID(), op: .create, collection: "people", uuid: UUID(), baseVersion: nil, data: ["name": .string("Person \(seq)")]))
        }
        return (try WireCoding.encode(PushRequest(clientID: client, mutations: mutations)), mutations.map(\.uuid))
    }

    /// The server on a disk that can lose its power; `token` made on it.
    final class PoweredServer: @unchecked Sendable {
        // @unchecked Sendable: used by one test at a time.
        let directory: TemporaryDirectory
        let path: String
        let disk: FaultyDisk
        let durability: Durability
        private(set) var server: SyncServer
        let token: String

        init(durability: Durability = .powerLoss) throws {
            directory = try TemporaryDirectory()
            path = directory.path("server.sqlite")
            disk = try FaultyDisk(keepingOnlySynced: [path + ".blobs"])
            self.durability = durability
            server = try SyncServer(
                database: try SQLiteServerDatabase(path: path, vfs: disk.name, durability: .powerLoss), config: try ServerConfig())
            token = try server.tokens.issue(user: "f-1", role: .field, team: "t-1", ttl: nil)
            // Set up, then closed (which checkpoints and syncs) before the
            // test's own writes: what follows is what the tests lose or keep.
            server.database.close()
            server = try SyncServer(
                database: try SQLiteServerDatabase(path: path, vfs: disk.name, durability: durability), config: try ServerConfig())
        }

        /// The power goes (if it has not already), the process is gone, the machine starts again.
        func restart() {
            if !disk.isPoweredOff { disk.losePower() }
            server.database.close()
            disk.powerOn()
            server = try! SyncServer(
                database: try! SQLiteServerDatabase(path: path, vfs: disk.name, durability: durability), config: try! ServerConfig())
        }

        func handle(_ request: HTTPRequest) -> HTTPResponse { server.handle(request) }

        /// Every record uuid the feed holds, and the last cursor.
        func feed() throws -> (uuids: Set<UUID>, cursor: String?) {
            var uuids: Set<UUID> = []
            var cursor: String?
            while true {
                let answer = handle(PowerLossTests.request("GET", "/v1/pull?limit=1000" + (cursor.map { "&cursor=\($0)" } ?? ""), token: token))
                try #require(answer.status == 200, "pull answered \(answer.status): \(String(decoding: answer.body, as: UTF8.self))")
                let page = try WireCoding.decode(PullResponse.self, from: Data(answer.body))
                for change in page.changes { uuids.insert(change.uuid) }
                cursor = page.cursor.rawValue
                if !page.hasMore { return (uuids, cursor) }
            }
        }
    }

    @Test func everyPushAnsweredAppliedSurvivesAPowerLoss() throws {
        let server = try PoweredServer()
        let client = UUID()
        var seq: Int64 = 0
        var acknowledged: Set<UUID> = []
        for _ in 0..<5 {
            let push = try Self.push(10, client: client, after: &seq)
            let answer = server.handle(Self.request("POST", "/v1/push", token: server.token, body: push.body))
            #expect(answer.status == 200)
            let results = try WireCoding.decode(PushResponse.self, from: Data(answer.body)).results
            #expect(results.allSatisfy { $0.status == .applied })
            acknowledged.formUnion(push.uuids)
        }
        let before = try server.feed()
        server.restart()
        let after = try server.feed()
        #expect(acknowledged.isSubset(of: after.uuids), "every acknowledged create is on the server")
        // The device's cursor from before the loss is the feed's end still: an empty page, not a 410.
        let answer = server.handle(Self.request("GET", "/v1/pull?cursor=\(try #require(before.cursor))", token: server.token))
        #expect(answer.status == 200)
    }

    @Test func withCommitsThatAreNotSyncedTheServerLosesAnsweredPushesAndTheDevicesCursorIs410() throws {
        let server = try PoweredServer(durability: .processCrash)
        let client = UUID()
        var seq: Int64 = 0
        var acknowledged: Set<UUID> = []
        for _ in 0..<3 {
            let push = try Self.push(10, client: client, after: &seq)
            #expect(server.handle(Self.request("POST", "/v1/push", token: server.token, body: push.body)).status == 200)
            acknowledged.formUnion(push.uuids)
        }
        let before = try server.feed()
        #expect(acknowledged.isSubset(of: before.uuids))
        server.restart()
        let kept = try server.feed().uuids.intersection(acknowledged).count
        #expect(kept < 30, "the loss bites without synced commits (kept \(kept) of 30)")
        // The device holds a cursor past what the server now has: told so, never an empty page.
        let answer = server.handle(Self.request("GET", "/v1/pull?cursor=\(try #require(before.cursor))", token: server.token))
        #expect(answer.status == 410)
        #expect((try? WireCoding.decode(ErrorBody.self, from: Data(answer.body)))?.code == .resyncRequired)
    }

    @Test func aBlobCalledCompleteSurvivesAPowerLossByteForByte() throws {
        let server = try PoweredServer()
        let bytes = Data((0..<600_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) })
        let sha = Self.sha256(bytes)
        let put = server.handle(
            Self.request(
                "PUT", "/v1/blobs/\(sha)", token: server.token, body: bytes,
                headers: ["Content-Type": "image/jpeg", "Content-Length": String(bytes.count)]))
        #expect(put.status == 200, "\(String(decoding: put.body, as: UTF8.self))")
        #expect(server.handle(Self.request("HEAD", "/v1/blobs/\(sha)", token: server.token)).status == 200)

        server.restart()
        #expect(server.handle(Self.request("HEAD", "/v1/blobs/\(sha)", token: server.token)).status == 200)
        let get = server.handle(Self.request("GET", "/v1/blobs/\(sha)", token: server.token))
        #expect(get.status == 200)
        #expect(get.body.count == bytes.count && Self.sha256(Data(get.body)) == sha, "the bytes, not an empty file under a complete row (\(get.body.count) bytes)")
    }

    static func sha256(_ bytes: Data) -> String {
        var hash = SHA256()
        bytes.withUnsafeBytes { hash.update($0) }
        return hash.finishHex()
    }

    /// The power goes at every moment of a push in turn (at its n-th
    /// database write or sync): answered 200, the push is all there after
    /// the restart; not answered, it is all there or not at all (the device
    /// sends it again), never half.
    @Test func aPowerLossAtAnyMomentOfAPushKeepsItWholeOrNotAtAll() throws {
        let server = try PoweredServer()
        let client = UUID()
        var seq: Int64 = 0
        var acknowledged: Set<UUID> = []
        var moments = 0
        var lostBeforeAnswer = 0
        for moment in 0..<60 {
            let push = try Self.push(4, client: client, after: &seq)
            server.disk.losePower(after: moment)
            let answer = server.handle(Self.request("POST", "/v1/push", token: server.token, body: push.body))
            let powerWent = server.disk.isPoweredOff
            if answer.status == 200 && !powerWent { acknowledged.formUnion(push.uuids) }
            server.restart()
            let held = try server.feed().uuids
            #expect(acknowledged.isSubset(of: held), "moment \(moment): an acknowledged create is missing")
            let part = held.intersection(push.uuids).count
            #expect(part == 0 || part == 4, "moment \(moment): \(part) of the push's 4 creates are there")
            if powerWent {
                moments += 1
                if part == 0 { lostBeforeAnswer += 1 }
            }
            if part == 4 { acknowledged.formUnion(push.uuids) }
        }
        #expect(moments > 10, "the power went within \(moments) pushes")
        #expect(lostBeforeAnswer > 0, "some losses came before the commit was on the disk")
    }
}
