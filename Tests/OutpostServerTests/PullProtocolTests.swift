import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// PROTOCOL "GET /v1/pull", against a live server, once per backend.
@Suite("Pull protocol", .timeLimit(.minutes(5)))
struct PullProtocolTests {
    @Test(.enabled(if: ProcessInfo.processInfo.environment["CI"] != nil))
    func postgresIsTestedInCI() {
        #expect(Backend.available.contains(.postgres), "the README's test command must start PostgreSQL")
    }

    @Test(arguments: Backend.available)
    func pagesCoverTheScopeOnceInCommitOrder(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("u-1")
        let device = TestDevice()
        var uuids: [UUID] = []
        for index in 0..<25 {
            let uuid = UUID()
            uuids.append(uuid)
            _ = try await live.push(device.request(device.mutation(.create, uuid: uuid, data: ["name": .string("P\(index)")])), token: token)
        }
        // Edit one twice: it appears once, in its latest state, at its latest position.
        let first = uuids[0]
        _ = try await live.push(device.request(device.mutation(.update, uuid: first, data: ["phone": "1"])), token: token)
        _ = try await live.push(device.request(device.mutation(.update, uuid: first, data: ["phone": "2"])), token: token)

        let all = try await live.pullAll(token: token, limit: 7, query: "&collections=people")
        let seen = all.changes.map(\.uuid)
        #expect(seen.count == 25)
        #expect(Set(seen) == Set(uuids))
        #expect(seen.last == first)
        guard case .record(let latest) = all.changes.last else { throw CancellationError() }
        #expect(latest.data?["phone"] == "2")
        let versions = all.changes.compactMap { change -> Int64? in
            if case .record(let record) = change { return record.version }
            return nil
        }
        #expect(versions == versions.sorted(), "commit order")

        // Nothing new: an empty page returns the same cursor.
        let cursor = try #require(all.cursor)
        let empty = try await live.get("/v1/pull?collections=people&cursor=\(cursor.rawValue)", token: token)
        let page = try empty.decode(PullResponse.self)
        #expect(page.changes.isEmpty)
        #expect(page.cursor == cursor)
        #expect(!page.hasMore)

        // Later changes arrive from that cursor, tombstones included.
        _ = try await live.push(device.request(device.mutation(.delete, uuid: uuids[3])), token: token)
        let later = try await live.pullAll(token: token, cursor: cursor, query: "&collections=people")
        #expect(later.changes.count == 1)
        guard case .record(let tombstone) = later.changes.first else { throw CancellationError() }
        #expect(tombstone.deleted && tombstone.uuid == uuids[3] && tombstone.data == nil)
    }

    /// A field user's scope has two sources (their records, and the
    /// catalogs everyone reads): pages that take from both are merged in
    /// version order, pages that take from one are that source's buffer as
    /// it stands. Either way every change comes once, in order.
    @Test(arguments: Backend.available)
    func pagesFromOneSourceOrSeveralAreTheSameFeed(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("u-1")
        let device = TestDevice()
        var uuids: Set<UUID> = []
        for index in 0..<23 {
            let uuid = UUID()
            uuids.insert(uuid)
            _ = try await live.push(device.request(device.mutation(.create, uuid: uuid, data: ["name": .string("P\(index)")])), token: token)
        }
        for limit in [1, 4, CatalogSeed.entries.count, CatalogSeed.entries.count + 1, 500] {
            let all = try await live.pullAll(token: token, limit: limit, query: "&collections=people,catalogs")
            let versions = all.changes.compactMap { change -> Int64? in
                if case .record(let record) = change { return record.version }
                return nil
            }
            #expect(versions.count == 23 + CatalogSeed.entries.count, "limit \(limit)")
            #expect(versions == versions.sorted() && Set(versions).count == versions.count, "once each, in order (limit \(limit))")
            #expect(Set(all.changes.map(\.uuid)).isSuperset(of: uuids), "limit \(limit)")
        }
    }

    @Test(arguments: Backend.available)
    func catalogsAreDownloadedByEveryRole(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        for role in Role.allCases {
            let token = try live.token("someone-\(role.rawValue)", role)
            let all = try await live.pullAll(token: token, query: "&collections=catalogs")
            #expect(all.changes.count == CatalogSeed.entries.count)
        }
    }

    @Test(arguments: Backend.available)
    func removedWhenARecordLeavesTheScope(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let ana = try live.token("u-1", team: "t-1")
        let bea = try live.token("u-2", team: "t-2")
        let coordinator = try live.token("c-1", .coordinator, team: "t-1")
        let admin = try live.token("a-1", .admin, team: "hq")
        let device = TestDevice()
        let uuid = UUID()
        _ = try await live.push(device.request(device.mutation(.create, uuid: uuid, data: ["name": "Ana"])), token: ana)
        let anaCursor = try #require(try await live.pullAll(token: ana, query: "&collections=people").cursor)
        let coordinatorCursor = try #require(try await live.pullAll(token: coordinator, query: "&collections=people").cursor)

        let body = try JSONSerialization.data(withJSONObject: ["owner": "u-2", "team": "t-2"])
        let forbidden = try await live.send("POST", "/v1/records/people/\(uuid.wireText)/assign", token: ana, body: body)
        #expect(forbidden.status == 403)
        let assigned = try await live.send("POST", "/v1/records/people/\(uuid.wireText)/assign", token: admin, body: body)
        #expect(assigned.status == 200)

        for (token, cursor) in [(ana, anaCursor), (coordinator, coordinatorCursor)] {
            let after = try await live.pullAll(token: token, cursor: cursor, query: "&collections=people")
            #expect(after.changes == [.removed(collection: "people", uuid: uuid)])
        }
        let beaView = try await live.pullAll(token: bea, query: "&collections=people")
        #expect(beaView.changes.map(\.uuid) == [uuid])
        #expect(try await live.get("/v1/records/people/\(uuid.wireText)", token: ana).status == 404)
    }

    @Test(arguments: Backend.available)
    func windowStartLimitsRecordsButKeepsTombstones(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("c-1", .coordinator)
        let device = TestDevice()
        let old = UUID()
        let recent = UUID()
        let gone = UUID()
        _ = try await live.push(
            device.request(
                device.mutation(.create, uuid: old, data: ["name": "Old", "created_at": "2024-01-01T00:00:00Z"]),
                device.mutation(.create, uuid: recent, data: ["name": "New", "created_at": "2026-06-01T00:00:00+02:00"]),
                device.mutation(.create, uuid: gone, data: ["name": "Gone", "created_at": "2024-01-01T00:00:00Z"])),
            token: token)
        _ = try await live.push(device.request(device.mutation(.delete, uuid: gone)), token: token)
        let windowed = try await live.pullAll(token: token, query: "&collections=people&window_start=2025-12-01T00:00:00Z")
        #expect(Set(windowed.changes.map(\.uuid)) == [recent, gone])
        let bad = try await live.get("/v1/pull?window_start=last-year", token: token)
        #expect(bad.status == 400)
        #expect(bad.error?.fields?["window_start"] != nil)
    }

    @Test(arguments: Backend.available)
    func cursorsAreCheckedAndTheHorizonAnswers410(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("u-1", team: "t-1")
        let device = TestDevice()
        let uuid = UUID()
        _ = try await live.push(device.request(device.mutation(.create, uuid: uuid, data: ["name": "Ana"])), token: token)
        let cursor = try #require(try await live.pullAll(token: token).cursor)

        #expect(try await live.get("/v1/pull?cursor=garbage", token: token).error?.code == .invalidRequest)
        // The same user in another team holds a cursor from another scope.
        let moved = try live.token("u-1", team: "t-9")
        #expect(try await live.get("/v1/pull?cursor=\(cursor.rawValue)", token: moved).error?.code == .resyncRequired)

        // Two records that stay, then a delete; the horizon passes and
        // housekeeping purges the tombstone.
        let kept = [device.mutation(.create, data: ["name": "Bea"]), device.mutation(.create, data: ["name": "Cai"])]
        _ = try await live.push(PushRequest(clientID: device.clientID, mutations: kept), token: token)
        _ = try await live.push(device.request(device.mutation(.delete, uuid: uuid)), token: token)
        live.clock.advance(by: 91 * 86_400)
        try live.server.runMaintenance()
        // The purged record's history goes with it; the kept ones' stays.
        let history = try live.database.read { sql in
            try Set(sql.query("SELECT uuid FROM record_history", []).map { $0.string(0) })
        }
        #expect(!history.contains(uuid.wireText), "the purged record's history was kept")
        #expect(history.isSuperset(of: kept.map(\.uuid.wireText)), "a kept record's history was purged")
        let stale = try await live.get("/v1/pull?cursor=\(cursor.rawValue)", token: token)
        #expect(stale.status == 410)
        #expect(stale.error?.code == .resyncRequired)
        // A fresh download pages through to the end, one record a page: its
        // cursors stand below the purged deletion, but the download began
        // after the purge, so they are not stale.
        let fresh = try await live.pullAll(token: token, limit: 1, query: "&collections=people")
        #expect(Set(fresh.changes.map(\.uuid)) == Set(kept.map(\.uuid)))
        let next = try await live.get("/v1/pull?collections=people&cursor=\(try #require(fresh.cursor).rawValue)", token: token)
        #expect(next.status == 200)
    }

    @Test(arguments: Backend.available)
    func limitsAreEnforced(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("u-1")
        for target in ["/v1/pull?limit=0", "/v1/pull?limit=100000", "/v1/pull?limit=ten", "/v1/pull?collections=invoices"] {
            let response = try await live.get(target, token: token)
            #expect(response.status == 400, "\(target)")
            #expect(response.error?.code == .invalidRequest)
        }
    }
}
