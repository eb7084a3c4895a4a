import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// A pull page is built in a buffer with room for a full page only once it
/// grows past its first 32 kB: a live channel's page (mostly empty) may be
/// held a while, and 10,000 idle streams each holding a full page's room
/// took 60 MB more.
@Suite("The memory a pull page keeps", .timeLimit(.minutes(2)))
struct PullPageMemoryTests {
    @Test func aShortPageKeepsNoRoomForAFullOneAndAFullPageIsWhole() async throws {
        let directory = try TemporaryDirectory()
        let database = try SQLiteServerDatabase(path: directory.path("server.sqlite"))
        let config = try ServerConfig()
        let server = try SyncServer(database: database, config: config)
        let principal = Principal(user: "f-1", role: .field, team: "t-1")
        let pull = PullService(database: database, config: config, clock: SystemWallClock())
        let request = PullService.Request(collections: ["people"], cursor: nil, limit: config.maxPullLimit, windowStart: nil)

        let empty = try pull.page(request, as: principal)
        #expect(empty.changes == 0)
        #expect(empty.body.capacity < 4 * 1024, "an empty page keeps \(empty.body.capacity) bytes")

        let device = TestDevice()
        let creates = (0..<300).map { device.mutation(.create, data: ["name": .string("Person \($0)"), "notes": .string(String(repeating: "n", count: 300))]) }
        _ = try PushService(database: database, config: config, clock: SystemWallClock(), hooks: server.hooks, hub: server.liveHub)
            .push(PushRequest(clientID: device.clientID, mutations: creates), as: principal)
        let full = try pull.page(request, as: principal)
        #expect(full.changes == 300)
        // 300 records of ~400 bytes pass 32 kB: the room for a full page was taken once, and the body is the changes.
        let decoded = try WireCoding.decode(PullResponse.self, from: Data(full.body))
        #expect(decoded.changes.count == 300)
        #expect(Array(full.changesJSON).first == UInt8(ascii: "{") && Array(full.changesJSON).last == UInt8(ascii: "}"))
    }
}
