import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// A cursor past the end of the feed (the server lost its last commits to a
/// power loss, or was restored without `outpost feed restart`) is answered
/// 410, never an empty page that would leave the device there, silently
/// missing every record written until versions passed it.
@Suite("Cursor past the end of the feed", .timeLimit(.minutes(2)))
struct CursorPastFeedEndTests {
    /// The same cursor with its version moved by `shift` (tests read the
    /// server's cursor format; clients never do).
    static func moved(_ cursor: PullCursor, by shift: Int64) throws -> String {
        let text = try #require(Base64URL.decode(cursor.rawValue).flatMap { String(validating: $0, as: UTF8.self) })
        var parts = text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(parts.count == 4 && parts[0] == "v2", "a v2 cursor: \(text)")
        parts[1] = String(try #require(Int64(parts[1])) + shift)
        return Base64URL.encode(Array(parts.joined(separator: ".").utf8))
    }

    @Test(arguments: Backend.available)
    func aCursorFromTheFutureIs410AndTheNewestCursorIsNot(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("u-1")
        let device = TestDevice()
        _ = try await live.push(device.request(device.mutation(.create, data: ["name": "Ana"])), token: token)
        let newest = try #require(try await live.pullAll(token: token, query: "&collections=people").cursor)

        // The newest cursor is at the end, not past it: an empty page.
        let atEnd = try await live.get("/v1/pull?collections=people&cursor=\(newest.rawValue)", token: token)
        #expect(atEnd.status == 200)
        #expect(try atEnd.decode(PullResponse.self).changes.isEmpty)

        // One version past what the server ever handed out, and far past: 410.
        // (On PostgreSQL versions step by transaction id: a few thousand transactions past.)
        for shift: Int64 in [backend == .sqlite ? 1 : FeedVersions.perTransaction << 12, 1 << 40] {
            let future = try Self.moved(newest, by: shift)
            let answer = try await live.get("/v1/pull?collections=people&cursor=\(future)", token: token)
            #expect(answer.status == 410, "a cursor \(shift) past the end")
            #expect(answer.error?.code == .resyncRequired)
        }

        // Later writes do not change the answer for a cursor still past them.
        _ = try await live.push(device.request(device.mutation(.create, data: ["name": "Bea"])), token: token)
        let farFuture = try Self.moved(newest, by: 1 << 40)
        #expect(try await live.get("/v1/pull?collections=people&cursor=\(farFuture)", token: token).status == 410)
        // And a device that downloads again from nothing sees everything.
        #expect(try await live.pullAll(token: token, query: "&collections=people").changes.count == 2)
    }
}
