import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// `outpost feed restart` says what it did, and when it is run again with
/// nothing written in between, that the first run had already done it.
@Suite("Feed restart report", .timeLimit(.minutes(2)))
struct FeedRestartReportTests {
    static func push(_ name: String, to server: SyncServer, token: String) throws {
        let device = TestDevice()
        let body = try WireCoding.encode(device.request(device.mutation(.create, data: ["name": .string(name)])))
        var request = HTTPRequest(method: "POST", path: "/v1/push", headers: ["Authorization": "Bearer \(token)"], body: body)
        request.headers["content-type"] = "application/json"
        let answer = server.handle(request)
        #expect(answer.status == 200, "push \(name): \(String(decoding: answer.body, as: UTF8.self))")
    }

    @Test func aSecondRestartWithNothingWrittenSaysTheFirstHadDoneIt() throws {
        let directory = try TemporaryDirectory(prefix: "outpost-feed-restart")
        let server = try SyncServer(database: try SQLiteServerDatabase(path: directory.path("s.sqlite")), config: ServerConfig())
        let token = try server.tokens.issue(user: "ana", role: .field, team: "north", ttl: nil)
        try Self.push("Before", to: server, token: token)

        let first = try FeedVersions.restart(server.database)
        #expect(first.unusedPrevious == nil, "the first restart after a write is a real one")
        #expect(first.highestStored > 0 && first.start > first.highestStored)

        let second = try FeedVersions.restart(server.database)
        #expect(second.unusedPrevious == first.start, "nothing was written between the two")
        #expect(second.start > first.start, "the feed still only moves forward")

        try Self.push("After", to: server, token: token)
        let third = try FeedVersions.restart(server.database)
        #expect(third.unusedPrevious == nil, "a change was written since: this restart counts")
        #expect(third.highestStored > second.start)
    }

    @Test func theCommandPrintsWhatItDidThenThatItWasAlreadyDone() async throws {
        let directory = try TemporaryDirectory(prefix: "outpost-feed-restart-cli")
        let path = directory.path("server.sqlite")
        let server = try SyncServer(database: try SQLiteServerDatabase(path: path), config: ServerConfig())
        let token = try server.tokens.issue(user: "ana", role: .field, team: "north", ttl: nil)
        try Self.push("Before", to: server, token: token)
        server.database.close()

        let first = try await runBlocking { try OutpostProcess.run(["feed", "restart", "--database", path]) }
        #expect(first.contains("Restarted the change feed"), "\(first)")
        #expect(!first.contains("already"), "\(first)")
        let second = try await runBlocking { try OutpostProcess.run(["feed", "restart", "--database", path]) }
        #expect(second.contains("had already been restarted"), "\(second)")
        #expect(second.contains("nothing has been written since"), "\(second)")
    }
}
