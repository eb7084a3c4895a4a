import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// Applying pull pages to a real store: records go in many to a statement,
/// so every outcome is checked on runs longer than one statement.
@Suite("Applying pull pages", .timeLimit(.minutes(5)))
struct PullApplyTests {
    let time = ServerTimestamp(rawValue: "2026-11-29T10:00:00.123456Z")

    func person(_ uuid: UUID, version: Int64, name: String, owner: String = "u-1") -> PullChange {
        .record(
            WireRecord(
                collection: "people", uuid: uuid, id: version, version: version, updatedAt: time, deleted: false, owner: owner,
                team: "t-1", data: ["name": .string(name), "section": .int(version)]))
    }

    func page(_ changes: [PullChange], cursor: String = "c", hasMore: Bool = false) throws -> RawPullPage {
        try RawPullPage(PullResponse(changes: changes, cursor: PullCursor(rawValue: cursor), hasMore: hasMore, serverTime: time))
    }

    @Test func aLongPageIsStoredWholeWithTheServersText() async throws {
        let fixture = try StoreFixture()
        let uuids = (0..<200).map { _ in UUID() }
        let result = try await fixture.store.applyPull(
            page(uuids.enumerated().map { person($1, version: Int64($0 + 1), name: "P\($0)", owner: "Jos\u{e9} \"\($0)\"") }),
            collections: ["people"])
        #expect(result.applied == 200)
        #expect(result.keptLocal == 0)
        for (index, uuid) in uuids.enumerated() {
            let stored = try #require(try await fixture.store.get(in: "people", uuid))
            #expect(stored.value == ["name": .string("P\(index)"), "section": .int(Int64(index + 1))])
            #expect(stored.syncState == .synced)
            #expect(stored.serverVersion == Int64(index + 1))
            #expect(stored.owner == "Jos\u{e9} \"\(index)\"")
            #expect(stored.serverUpdatedAt == time)
        }
        #expect(try await fixture.store.pullState(collections: ["people"]).cursor == PullCursor(rawValue: "c"))
    }

    @Test func localEditsAndNewerCopiesAreLeftAloneInsideALongRun() async throws {
        let fixture = try StoreFixture()
        let uuids = (0..<130).map { _ in UUID() }
        try await fixture.store.applyPull(
            page(uuids.enumerated().map { person($1, version: Int64($0 + 1), name: "old") }), collections: ["people"])
        // Record 5 is edited on the device; record 70 already holds a newer version.
        try await fixture.store.update(in: "people", uuids[5], patch: ["name": .string("edited here")])
        try await fixture.store.applyPull(page([person(uuids[70], version: 900, name: "newest")]), collections: ["people"])

        let result = try await fixture.store.applyPull(
            page(uuids.enumerated().map { person($1, version: Int64(500 + $0), name: "new") }), collections: ["people"])
        #expect(result.applied == 128)
        #expect(result.keptLocal == 1)
        let edited = try #require(try await fixture.store.get(in: "people", uuids[5]))
        #expect(edited.value["name"] == .string("edited here"))
        #expect(edited.syncState == .pending)
        let newest = try #require(try await fixture.store.get(in: "people", uuids[70]))
        #expect(newest.value["name"] == .string("newest"))
        #expect(newest.serverVersion == 900)
        for index in [0, 63, 64, 127, 128, 129] {
            #expect(try await fixture.store.get(in: "people", uuids[index])?.value["name"] == .string("new"))
        }
    }

    @Test func tombstonesAndRemovalsBetweenRecordsDeleteOnlySyncedCopies() async throws {
        let fixture = try StoreFixture()
        let uuids = (0..<100).map { _ in UUID() }
        try await fixture.store.applyPull(
            page(uuids.enumerated().map { person($1, version: Int64($0 + 1), name: "kept") }), collections: ["people"])
        try await fixture.store.update(in: "people", uuids[2], patch: ["name": .string("mine")])
        var changes = uuids.enumerated().map { person($1, version: Int64(200 + $0), name: "again") }
        changes[1] = .record(
            WireRecord(
                collection: "people", uuid: uuids[1], id: 1, version: 300, updatedAt: time, deleted: true, owner: "u-1",
                team: "t-1", data: nil))
        changes[2] = .removed(collection: "people", uuid: uuids[2])
        changes[80] = .removed(collection: "people", uuid: uuids[80])
        let result = try await fixture.store.applyPull(page(changes), collections: ["people"])
        #expect(result.deleted == 1)
        #expect(result.removed == 1)
        #expect(result.keptLocal == 1)
        #expect(result.applied == 97)
        #expect(try await fixture.store.get(in: "people", uuids[1]) == nil)
        #expect(try await fixture.store.get(in: "people", uuids[2])?.value["name"] == .string("mine"))
        #expect(try await fixture.store.get(in: "people", uuids[80]) == nil)
        #expect(try await fixture.store.get(in: "people", uuids[99])?.value["name"] == .string("again"))
    }
}
