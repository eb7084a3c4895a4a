import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// The statements a live page runs are prepared while the channel opens:
/// preparing them writes nothing, and pages of one record and of a full
/// statement's 64 go in as before.
@Suite("Live page statements", .timeLimit(.minutes(2)))
struct LivePageStatementsTests {
    let time = ServerTimestamp(rawValue: "2026-12-06T09:00:00.000000Z")

    func page(_ uuids: [UUID], from version: Int64, cursor: String) throws -> RawPullPage {
        let changes = uuids.enumerated().map { offset, uuid in
            PullChange.record(
                WireRecord(
                    collection: "people", uuid: uuid, id: version + Int64(offset), version: version + Int64(offset), updatedAt: time,
                    deleted: false, owner: "u-1", team: "t-1", data: ["name": .string("P\(offset)")]))
        }
        return try RawPullPage(PullResponse(changes: changes, cursor: PullCursor(rawValue: cursor), hasMore: false, serverTime: time))
    }

    @Test func preparingWritesNothingAndPagesGoInAsBefore() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        await store.preparePageStatements()
        #expect(try await store.pullState(collections: store.syncedCollections).cursor == nil)
        #expect(try await store.localCounts()["people"] == 0)

        let first = (0..<64).map { _ in UUID() }
        #expect(try await store.applyPull(page(first, from: 1, cursor: "c1"), collections: store.syncedCollections).applied == 64)
        await store.preparePageStatements()
        #expect(try await store.localCounts()["people"] == 64, "preparing again changed nothing")
        let one = UUID()
        #expect(try await store.applyPull(page([one], from: 65, cursor: "c2"), collections: store.syncedCollections).applied == 1)
        let next = (0..<64).map { _ in UUID() }
        #expect(try await store.applyPull(page(next, from: 66, cursor: "c3"), collections: store.syncedCollections).applied == 64)
        #expect(try await store.localCounts()["people"] == 129)
        #expect(try await store.pullState(collections: store.syncedCollections).cursor == PullCursor(rawValue: "c3"))
        #expect(try await store.get(in: "people", one)?.value == ["name": "P0"])
        await store.close()
    }
}
