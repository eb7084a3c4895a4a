import Foundation
import OutpostCore
import OutpostSQLite
import OutpostTesting
import Testing

@testable import Outpost
@testable import OutpostServer

/// A first download stores the pages already here together, and never waits
/// for the network with pages in hand.
@Suite("Download batches", .timeLimit(.minutes(5)))
struct DownloadBatchTests {
    static let time = ServerTimestamp(rawValue: "2026-12-06T10:00:00.000000Z")

    static func page(_ uuids: ArraySlice<UUID>, cursor: String, hasMore: Bool, firstVersion: Int64 = 1) throws -> RawPullPage {
        let changes = uuids.enumerated().map { offset, uuid in
            PullChange.record(
                WireRecord(
                    collection: "people", uuid: uuid, id: firstVersion + Int64(offset), version: firstVersion + Int64(offset),
                    updatedAt: time, deleted: false, owner: "u-1", team: "t-1", data: ["name": .string("P\(offset)")]))
        }
        return try RawPullPage(PullResponse(changes: changes, cursor: PullCursor(rawValue: cursor), hasMore: hasMore, serverTime: time))
    }

    // MARK: When a batch is stored

    @Test func pagesWaitOnlyWhileTheNextIsHereAndWithinTheBounds() throws {
        let uuids = (0..<30).map { _ in UUID() }
        var batch = DownloadBatch(maxRecords: 25, maxBytes: 1 << 20)
        #expect(!batch.isDue(nextIsHere: false), "nothing held, nothing to store")
        batch.add(try Self.page(uuids[0..<10], cursor: "c1", hasMore: true))
        #expect(!batch.isDue(nextIsHere: true))
        #expect(batch.isDue(nextIsHere: false), "pages in hand are never kept waiting for the network")
        batch.add(try Self.page(uuids[10..<20], cursor: "c2", hasMore: true))
        #expect(!batch.isDue(nextIsHere: true))
        batch.add(try Self.page(uuids[20..<30], cursor: "c3", hasMore: true))
        #expect(batch.records == 30)
        #expect(batch.isDue(nextIsHere: true), "the record bound is reached")
        #expect(batch.take().map(\.cursor.rawValue) == ["c1", "c2", "c3"])
        #expect(batch.isEmpty && batch.records == 0 && batch.bytes == 0)
    }

    @Test func theLastPageAndTheByteBoundStoreAtOnce() throws {
        let uuids = (0..<20).map { _ in UUID() }
        var last = DownloadBatch()
        last.add(try Self.page(uuids[0..<10], cursor: "c1", hasMore: false))
        #expect(last.isDue(nextIsHere: true), "the last page is stored at once")
        let first = try Self.page(uuids[0..<10], cursor: "c1", hasMore: true)
        var small = DownloadBatch(maxRecords: 1_000, maxBytes: first.text.count + 1)
        small.add(first)
        #expect(!small.isDue(nextIsHere: true))
        small.add(try Self.page(uuids[10..<20], cursor: "c2", hasMore: true))
        #expect(small.isDue(nextIsHere: true), "the byte bound is reached")
    }

    // MARK: Storing pages together

    @Test func pagesStoredTogetherKeepTheLastCursorAndEveryRecord() async throws {
        let fixture = try StoreFixture()
        let uuids = (0..<150).map { _ in UUID() }
        var pages = try [
            Self.page(uuids[0..<70], cursor: "c1", hasMore: true),
            Self.page(uuids[70..<140], cursor: "c2", hasMore: true, firstVersion: 71),
        ]
        // A record of the first page deleted by the second, in the same transaction.
        pages.append(
            try RawPullPage(
                PullResponse(
                    changes: [
                        .record(
                            WireRecord(
                                collection: "people", uuid: uuids[3], id: 500, version: 500, updatedAt: Self.time, deleted: true,
                                owner: "u-1", team: "t-1", data: nil))
                    ], cursor: PullCursor(rawValue: "c3"), hasMore: true, serverTime: Self.time)))
        let result = try await fixture.store.applyPulls(pages, collections: ["people", "visits"])
        #expect(result.applied == 140)
        #expect(result.deleted == 1)
        #expect(try await fixture.store.query(Person.self).count == 139)
        #expect(try await fixture.store.get(Person.self, uuids[3]) == nil)
        #expect(try await fixture.store.pullState(collections: ["people", "visits"]).cursor == PullCursor(rawValue: "c3"))
        #expect(try await fixture.store.pageCacheSize == -32_768, "more pages follow")

        let empty = try await fixture.store.applyPulls([], collections: ["people", "visits"])
        #expect(empty == PullPageResult(), "no pages: nothing is stored")
        #expect(try await fixture.store.pullState(collections: ["people", "visits"]).cursor == PullCursor(rawValue: "c3"))

        try await fixture.store.applyPulls(
            [try Self.page(uuids[140..<150], cursor: "c4", hasMore: false, firstVersion: 141)], collections: ["people", "visits"])
        #expect(try await fixture.store.query(Person.self).count == 149)
        #expect(try await fixture.store.pullState(collections: ["people", "visits"]).lastSyncedAt["people"] == Self.time)
    }

    // MARK: Through the engine

    /// A reader of 60 people in pages of 10 (the catalogs come too: 18 changes).
    static func download(_ harness: SyncHarness, name: String) throws -> SyncHarness.Device {
        var options = SyncOptions()
        options.periodicInterval = nil
        options.pullPageSize = 10
        options.reconnectJitter = .zero
        options.liveUpdates = false
        return try harness.device("u-1", name: name, options: options)
    }

    static func seeded() async throws -> SyncHarness {
        let harness = try SyncHarness()
        let writer = try harness.device("u-1", name: "writer")
        for index in 0..<60 { try await writer.store.create(Person(name: "P\(index)")) }
        try await writer.engine.sync()
        return harness
    }

    /// Holds the answer to the `n`th pull request with a cursor.
    static func hold(_ n: Int, of device: SyncHarness.Device) -> FaultInjectingTransport.Gate {
        let gate = FaultInjectingTransport.Gate()
        let seen = Locked(0)
        device.network.inject(.hold(gate)) { request in
            guard request.target.hasPrefix("/v1/pull"), request.target.contains("cursor=") else { return false }
            return seen.withLock {
                $0 += 1
                return $0 == n
            }
        }
        return gate
    }

    /// A download of records keyed in no key order (made elsewhere, UUIDv4)
    /// cut by the network after a few pages: the cycle that stops leaves the
    /// table with its uuid index, and the next one finishes the download.
    @Test func aFirstDownloadCutByTheNetworkLeavesItsIndexBuilt() async throws {
        let harness = try SyncHarness()
        let token = try harness.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)
        // Falling keys: no page of them, however few of its records are people, reads as key order.
        let keys = (1...60).map { _ in UUID() }.sorted { $0.wireText > $1.wireText }
        let mutations = keys.enumerated().map { index, uuid in
            Mutation(seq: Int64(index + 1), id: UUID(), op: .create, collection: "people", uuid: uuid, data: ["name": .string("P\(index)")])
        }
        let pushed = harness.server.handle(
            HTTPRequest(
                method: "POST", target: "/v1/push", headers: ["authorization": "Bearer \(token)", "content-type": "application/json"],
                body: try WireCoding.encode(PushRequest(clientID: UUID(), mutations: mutations))))
        #expect(pushed.status == 200)
        let reader = try Self.download(harness, name: "reader")
        let gate = Self.hold(4, of: reader)
        let sync = Task { try await reader.engine.sync() }
        try await gate.waitForArrivals(1)
        try await eventually("pages before the held one are stored") { try await reader.store.query(Person.self).count > 0 }
        let path = harness.directory.path("reader.sqlite")
        func hasUuidIndex() throws -> Bool {
            let file = try SQLiteConnection(path: path, readOnly: true)
            defer { file.close() }
            return try file.first("SELECT 1 FROM sqlite_schema WHERE type = 'index' AND name = 'people_uuid_key'") { _ in true } ?? false
        }
        #expect(try !hasUuidIndex(), "the download appends with the index off")
        reader.network.isOffline = true
        gate.open()
        _ = try? await sync.value
        #expect(try hasUuidIndex(), "the cycle that stopped built the index")
        reader.network.isOffline = false
        try await reader.engine.sync()
        #expect(try await reader.store.query(Person.self).count == 60)
        await reader.engine.stop()
    }

    @Test func recordsArriveWhileTheNextPageIsOnItsWay() async throws {
        let harness = try await Self.seeded()
        let reader = try Self.download(harness, name: "reader")
        let gate = Self.hold(3, of: reader)
        let observed = Locked(0)
        let observer = Task {
            for try await count in await reader.store.observeCount(Person.self) { observed.withLock { $0 = count } }
        }
        defer { observer.cancel() }
        let sync = Task { try await reader.engine.sync() }
        try await gate.waitForArrivals(1)
        // Pages 1 to 3 are here and page 4 is not: they are stored, and seen, now.
        try await eventually("the three pages before the held one are stored") {
            try await reader.store.localCounts().values.reduce(0, +) == 30
        }
        let people = try await reader.store.query(Person.self).count
        #expect(people > 0)
        try await eventually("the observer saw the \(people) people of those pages") { observed.withLock { $0 } == people }
        gate.open()
        let report = try await sync.value
        #expect(report.received == 18 + 60)
        #expect(try await reader.store.query(Person.self).count == 60)
    }

    @Test func closingBetweenBatchesLosesNothingAndDoublesNothing() async throws {
        let harness = try await Self.seeded()
        let first = try Self.download(harness, name: "reader")
        let gate = Self.hold(4, of: first)
        let sync = Task { try await first.engine.sync() }
        try await gate.waitForArrivals(1)
        try await eventually("the pages before the held one are stored") {
            try await first.store.localCounts().values.reduce(0, +) == 40
        }
        let committed = try await first.store.pullState(collections: first.store.syncedCollections).cursor
        #expect(committed != nil)
        // The app goes away with page 5 on its way: its cycle is dropped, the store closed.
        await first.engine.stop()
        gate.open()
        _ = try? await sync.value
        await first.store.close()

        let again = try Self.download(harness, name: "reader")
        #expect(try await again.store.pullState(collections: again.store.syncedCollections).cursor == committed)
        let report = try await again.engine.sync()
        #expect(report.received == 18 + 60 - 40, "only what was not committed is downloaded again")
        #expect(try await again.store.query(Person.self).count == 60)
        #expect(Set(try await again.store.query(Person.self).map(\.value.name)).count == 60, "no record twice")
        #expect(again.network.delivered(to: "/v1/pull").allSatisfy { $0.target.contains("cursor=") }, "not from the start")
    }
}
