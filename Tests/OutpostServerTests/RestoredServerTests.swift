import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostSQLite
import OutpostTesting
import Testing

/// A backup of the server's database, restored: devices that synced after
/// the backup hold cursors the restored feed never reached.
/// `outpost feed restart` makes every one of them download again (410),
/// keeping their unsent changes; and on PostgreSQL, whose transaction ids
/// restart when a dump is restored into another cluster, versions keep
/// growing past the restored ones by themselves.
@Suite("Restored server backup", .timeLimit(.minutes(2)))
struct RestoredServerTests {
    static func request(_ method: String, _ target: String, token: String, body: Data = Data()) -> HTTPRequest {
        HTTPRequest(
            method: method, target: target,
            headers: ["Authorization": "Bearer \(token)", "Content-Type": "application/json"], body: body)
    }

    @Test func afterARestoreFeedRestartSendsEveryDeviceBackToAFullDownload() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("server.sqlite")
        let backup = directory.path("backup.sqlite")
        var server: SyncServer? = try SyncServer(database: try SQLiteServerDatabase(path: path), config: try ServerConfig())
        let token = try server!.tokens.issue(user: "f-1", role: .field, team: "t-1", ttl: nil)
        let device = TestDevice()
        func push(_ name: String, to server: SyncServer) throws {
            let body = try WireCoding.encode(device.request(device.mutation(.create, data: ["name": .string(name)])))
            #expect(server.handle(Self.request("POST", "/v1/push", token: token, body: body)).status == 200)
        }
        func pull(_ cursor: PullCursor?, from server: SyncServer) throws -> (status: Int, page: PullResponse?) {
            let target = "/v1/pull?collections=people" + (cursor.map { "&cursor=\($0.rawValue)" } ?? "")
            let answer = server.handle(Self.request("GET", target, token: token))
            return (answer.status, try? WireCoding.decode(PullResponse.self, from: Data(answer.body)))
        }

        try push("Before the backup", to: server!)
        let backupConnection = try SQLiteConnection(path: path)
        _ = try backupConnection.run("VACUUM INTO '\(backup)'")
        backupConnection.close()
        try push("After the backup", to: server!)
        let ahead = try #require(try pull(nil, from: server!).page?.cursor)
        server!.database.close()
        server = nil

        // The backup comes back (the database file and its journal replaced); a new record is written.
        for file in [path, path + "-wal", path + "-shm"] where FileManager.default.fileExists(atPath: file) {
            try FileManager.default.removeItem(atPath: file)
        }
        try FileManager.default.copyItem(atPath: backup, toPath: path)
        var restored = try SyncServer(database: try SQLiteServerDatabase(path: path), config: try ServerConfig())
        let device2 = TestDevice()
        let written = try WireCoding.encode(device2.request(device2.mutation(.create, data: ["name": "Written after the restore"])))
        #expect(restored.handle(Self.request("POST", "/v1/push", token: token, body: written)).status == 200)
        // The hazard: the device's cursor is past the new record's version.
        #expect(try pull(ahead, from: restored).page?.changes.isEmpty == true, "the hazard this guards against")

        // The operator runs the restart (the command line, on the file).
        restored.database.close()
        _ = try await runBlocking { try OutpostProcess.run(["feed", "restart", "--database", path]) }
        restored = try SyncServer(database: try SQLiteServerDatabase(path: path), config: try ServerConfig())
        let answer = try pull(ahead, from: restored)
        #expect(answer.status == 410)
        let fresh = try #require(try pull(nil, from: restored).page)
        #expect(Set(fresh.changes.compactMap(\.record).map { $0.data?["name"]?.stringValue }) == ["Before the backup", "Written after the restore"])
        // Versions written after the restart are above the new start.
        try push("After the restart", to: restored)
        let next = try #require(try pull(fresh.cursor, from: restored).page)
        #expect(next.changes.count == 1)
        #expect((next.changes.first?.record?.version ?? 0) > FeedVersions.restartMargin)
    }

    @Test(.enabled(if: Backend.postgresURL != nil, "needs scripts/with-postgres"))
    func onPostgreSQLVersionsStayAboveARestoredFeedWhenTransactionIdsRestart() async throws {
        let live = try LiveServer(.postgres)
        let token = try live.token("f-1")
        let device = TestDevice()
        let create = device.mutation(.create, data: ["name": "Ana"])
        let first = try await live.push(device.request(create), token: token)
        let version = try #require(first.results.first?.record?.version)
        // As if the dump were restored into a cluster whose transaction ids
        // are far lower: the base falls below what is stored.
        _ = try live.database.write { sql in
            try sql.execute("UPDATE server_state SET value = CAST(CAST(value AS BIGINT) - ? AS TEXT) WHERE key = 'feed_base'", [
                .integer(version * 2)
            ])
        }
        let restarted = try LiveServer(sharing: live)
        let edit = device.mutation(.update, uuid: create.uuid, data: ["name": "Ana Maria"])
        let answer = try await restarted.push(device.request(edit), token: token)
        #expect(answer.results.first?.status == .applied)
        #expect((answer.results.first?.record?.version ?? 0) > version, "the record's version went on growing")
    }
}
