import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// Retention limits per collection. Old synced copies leave the
/// device (never the server), reckoned on the server's clock, and never a
/// record with local changes waiting.
@Suite("Retention limits", .timeLimit(.minutes(5)))
struct RetentionTests {
    let day: TimeInterval = 86_400
    let now = Date(timeIntervalSince1970: 1_796_000_000)

    func record(_ collection: String, _ uuid: UUID, version: Int64, updated: Date) -> PullChange {
        .record(
            WireRecord(
                collection: collection, uuid: uuid, id: version, version: version, updatedAt: ServerTimestamp(updated),
                deleted: false, owner: "u-1", team: "t-1", data: ["name": .string("r\(version)")]))
    }

    func page(_ changes: [PullChange], at time: Date, hasMore: Bool) -> PullResponse {
        PullResponse(changes: changes, cursor: PullCursor(rawValue: "c\(time.timeIntervalSince1970)"), hasMore: hasMore, serverTime: ServerTimestamp(time))
    }

    @Test func oldSyncedCopiesLeaveTheDeviceOncePullsComplete() async throws {
        let directory = try TemporaryDirectory()
        // The device's own clock is far off: only server times count.
        let clock = ManualWallClock(now + 400 * day)
        let collections = [
            CollectionDescriptor(name: "people", retention: 30 * day),
            CollectionDescriptor(name: "visits", references: ["person": "people"]),
        ]
        let store = try LocalStore(
            path: directory.path("device.sqlite"), collections: collections, clock: clock, ids: UUIDv7Generator.seeded(3, clock: clock))
        let all = ["catalogs", "people", "visits"]
        let (old, recent, edited, visit, later) = (UUID(), UUID(), UUID(), UUID(), UUID())

        try await store.applyPull(
            page(
                [
                    record("people", old, version: 1, updated: now - 40 * day),
                    record("people", recent, version: 2, updated: now - 10 * day),
                    record("people", edited, version: 3, updated: now - 40 * day),
                    record("visits", visit, version: 4, updated: now - 40 * day),
                ], at: now, hasMore: true), collections: all)
        #expect(try await store.get(in: "people", old) != nil, "nothing is removed half way through a download")
        try await store.update(in: "people", edited, patch: ["name": .string("edited offline")])

        try await store.applyPull(page([], at: now, hasMore: false), collections: all)
        #expect(try await store.get(in: "people", old) == nil, "older than 30 days")
        #expect(try await store.get(in: "people", recent) != nil)
        #expect(try await store.get(in: "people", edited)?.value["name"] == .string("edited offline"), "local changes are never dropped")
        #expect(try await store.get(in: "visits", visit) != nil, "a collection without a limit keeps everything")
        #expect(try await store.localCounts()["people"] == 2)

        // At most once a day: a copy that came later the same day waits for the next run.
        try await store.applyPull(page([record("people", later, version: 5, updated: now - 50 * day)], at: now + 3_600, hasMore: false), collections: all)
        #expect(try await store.get(in: "people", later) != nil)
        try await store.applyPull(page([], at: now + 2 * day, hasMore: false), collections: all)
        #expect(try await store.get(in: "people", later) == nil)
        #expect(try await store.get(in: "people", recent) != nil, "12 days old on the server's clock")
        #expect(try await store.localCounts()["people"] == 2)
    }
}
