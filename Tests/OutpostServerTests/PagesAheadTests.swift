import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// A full pull page makes the server build the page after it at once; the
/// download's next request is answered with it. Served later than it was
/// built, it must still be a correct page, and only for the request it was
/// built for.
@Suite("Pages built ahead", .timeLimit(.minutes(5)))
struct PagesAheadTests {
    /// Pulls every page of `people` in pages of `limit`; each page's changes
    /// and whether more follows (the cursors carry the same positions).
    static func download(_ live: LiveServer, token: String, limit: Int, after cursor: PullCursor? = nil) async throws
        -> [(uuids: [UUID], versions: [Int64], hasMore: Bool, cursor: PullCursor)]
    {
        var pages: [(uuids: [UUID], versions: [Int64], hasMore: Bool, cursor: PullCursor)] = []
        var cursor = cursor
        while true {
            var target = "/v1/pull?collections=people&limit=\(limit)"
            if let cursor { target += "&cursor=\(cursor.rawValue)" }
            let page = try await live.get(target, token: token).decode(PullResponse.self)
            pages.append((page.changes.map(\.uuid), page.changes.compactMap(\.record).map(\.version), page.hasMore, page.cursor))
            cursor = page.cursor
            if !page.hasMore || pages.count > 100 { return pages }
        }
    }

    static func seeded(_ backend: Backend, buildsAhead: Bool, records: Int) async throws -> (LiveServer, String) {
        var config = try ServerConfig()
        config.buildsPagesAhead = buildsAhead
        let live = try LiveServer(backend, config: config)
        let token = try live.token("f-1")
        let device = TestDevice()
        let creates = (0..<records).map { device.mutation(.create, data: ["name": .string("Person \($0)")]) }
        _ = try await live.push(PushRequest(clientID: device.clientID, mutations: creates), token: token)
        return (live, token)
    }

    @Test(arguments: Backend.available)
    func aDownloadIsTheSameWithPagesBuiltAhead(_ backend: Backend) async throws {
        let (ahead, token) = try await Self.seeded(backend, buildsAhead: true, records: 95)
        let pages = try await Self.download(ahead, token: token, limit: 10)
        #expect(pages.count == 10)
        #expect(pages.dropLast().allSatisfy { $0.uuids.count == 10 && $0.hasMore })
        #expect(pages.last?.uuids.count == 5 && pages.last?.hasMore == false)
        let versions = pages.flatMap(\.versions)
        #expect(versions == versions.sorted() && Set(versions).count == 95, "every record once, in feed order")
        // The last full page's successor was built ahead and handed out: nothing is left kept.
        try await eventually("no page is left kept", timeout: .seconds(5)) { ahead.server.pagesAhead.count == 0 }

        let (plain, plainToken) = try await Self.seeded(backend, buildsAhead: false, records: 95)
        let plainPages = try await Self.download(plain, token: plainToken, limit: 10)
        #expect(plainPages.map(\.uuids.count) == pages.map(\.uuids.count))
        #expect(plainPages.map(\.hasMore) == pages.map(\.hasMore))
        #expect(plain.server.pagesAhead.count == 0, "off: nothing is built ahead")
    }

    /// A commit drops the pages built ahead: a device that pushed and then
    /// pulls finds its writes (a new record, an edit of one it already
    /// has) in that pull, in feed order, each once.
    @Test(arguments: Backend.available)
    func aCommitDropsThePagesBuiltAheadSoAPullAfterAPushHasIt(_ backend: Backend) async throws {
        let (live, token) = try await Self.seeded(backend, buildsAhead: true, records: 30)
        let first = try await live.get("/v1/pull?collections=people&limit=10", token: token).decode(PullResponse.self)
        #expect(first.hasMore)
        // The second and third pages are built now (the third once the second
        // was read); then two writes land.
        try await eventually("the next two pages are kept", timeout: .seconds(5)) { live.server.pagesAhead.count == 2 }
        let writer = TestDevice()
        let fresh = writer.mutation(.create, data: ["name": "Late"])
        _ = try await live.push(writer.request(fresh), token: token)
        #expect(live.server.pagesAhead.count == 0, "a page built before a commit was kept after it")
        let edited = try #require(first.changes.first?.record)
        _ = try await live.push(
            writer.request(writer.mutation(.update, uuid: edited.uuid, base: edited.version, data: ["name": "Edited"])),
            token: token)

        let rest = try await Self.download(live, token: token, limit: 10, after: first.cursor)
        let seen = rest.flatMap(\.uuids)
        #expect(seen.contains(fresh.uuid), "a record made after the page was built ahead was lost")
        #expect(seen.contains(edited.uuid), "an edit made after the page was built ahead was lost")
        let all = first.changes.map(\.uuid) + seen
        #expect(Set(all).count == 31)
        let versions = rest.flatMap(\.versions)
        #expect(versions == versions.sorted(), "pages still come in feed order")
    }

    /// A page built ahead for one caller is never another's: another user
    /// with the same cursor gets what that cursor means for them (410, the
    /// cursor names another scope), and another limit builds its own page.
    @Test func aPageBuiltAheadIsOnlyServedToTheRequestItWasBuiltFor() async throws {
        let (live, token) = try await Self.seeded(.sqlite, buildsAhead: true, records: 25)
        let first = try await live.get("/v1/pull?collections=people&limit=10", token: token).decode(PullResponse.self)
        try await eventually("the next two pages are kept", timeout: .seconds(5)) { live.server.pagesAhead.count == 2 }
        let other = try live.token("f-2")
        let stranger = try await live.get("/v1/pull?collections=people&limit=10&cursor=\(first.cursor.rawValue)", token: other)
        #expect(stranger.status == 410)
        let wider = try await live.get("/v1/pull?collections=people&limit=20&cursor=\(first.cursor.rawValue)", token: token)
            .decode(PullResponse.self)
        #expect(wider.changes.count == 15 && !wider.hasMore)
        #expect(live.server.pagesAhead.count == 2, "the pages built ahead wait for their own requests")
    }

    @Test func aPageIsKeptBrieflyServedOnceAndBuildsAreBounded() throws {
        let pages = PagesAhead(concurrentBuilds: 1, keep: .milliseconds(200))
        @Sendable func page(_ n: Int) -> PullService.Page {
            PullService.Page(body: Array("page \(n)".utf8), changesRange: 0..<0, cursor: "c\(n)", hasMore: true, changes: n, lastVersion: Int64(n))
        }
        func key(_ cursor: String) -> PagesAhead.Key {
            PagesAhead.Key(scope: "s", collections: nil, limit: 10, windowStart: nil, cursor: cursor)
        }
        let release = DispatchSemaphore(value: 0)
        pages.build(key("a")) {
            _ = release.wait(timeout: .now() + 5)
            return page(1)
        }
        // One build at a time: a second is not started while the first runs.
        pages.build(key("b")) { page(2) }
        #expect(pages.count == 1)
        release.signal()
        #expect(pages.take(key("a"))?.changes == 1, "a request waits for the page being built for it")
        #expect(pages.take(key("a")) == nil, "each page is served once")
        #expect(pages.take(key("b")) == nil)

        pages.build(key("c")) { page(3) }
        usleep(300_000)
        #expect(pages.take(key("c")) == nil, "a page not asked for in time is dropped")
        pages.build(key("d")) { throw DatabaseError(kind: .transient, message: "busy") }
        #expect(pages.take(key("d")) == nil, "a failed build leaves the request to build its own")

        // Many downloads at once keep at most `maxKept` pages.
        let few = PagesAhead(concurrentBuilds: 8, maxKept: 3, keep: .seconds(5))
        for n in 0..<6 { few.build(key("k\(n)")) { page(n) } }
        #expect(few.count == 3)
        #expect((0..<6).compactMap { few.take(key("k\($0)")) }.count == 3)
    }
}
