import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// The status's per-collection counts are kept between reads instead of
/// counted every sync cycle; they must still equal a fresh count after every
/// kind of change.
@Suite("Counts of records on the device", .timeLimit(.minutes(5)))
struct LiveCountTests {
    let time = ServerTimestamp(rawValue: "2026-11-29T10:00:00.123456Z")

    /// The counts the store keeps, against a fresh count by a second store on the same file.
    func expectExact(_ fixture: StoreFixture, _ step: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let kept = try await fixture.store.localCounts()
        let fresh = try fixture.reopen(seed: 99)
        let counted = try await fresh.localCounts()
        await fresh.close()
        #expect(kept == counted, "after \(step)", sourceLocation: sourceLocation)
    }

    func pulled(_ uuid: UUID, version: Int64, deleted: Bool = false) -> PullChange {
        .record(
            WireRecord(
                collection: "people", uuid: uuid, id: version, version: version, updatedAt: time, deleted: deleted,
                owner: "u-1", team: "t-1", data: deleted ? nil : ["name": .string("pulled \(version)")]))
    }

    @Test func countsStayExactThroughEveryKindOfChange() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        try await expectExact(fixture, "opening")

        var ids: [UUID] = []
        for index in 0..<6 { ids.append(try await store.create(Person(name: "P\(index)"))) }
        try await expectExact(fixture, "creates")
        try await store.update(Person.self, ids[0]) { $0.phone = "1" }
        try await store.delete(Person.self, ids[1])
        try await expectExact(fixture, "an edit and the delete of a record never sent")

        try await store.pushAll(to: server)
        try await store.delete(Person.self, ids[2])
        try await expectExact(fixture, "the delete of a record on the server (hidden until sent)")
        try await store.pushAll(to: server)
        try await expectExact(fixture, "the delete confirmed")

        // The server refuses a delete: the record comes back.
        try await store.delete(Person.self, ids[3])
        try await store.pushAll(to: server) { _ in .rejected }
        try await expectExact(fixture, "a refused delete")

        // A delete loses to an edit made elsewhere: the server copy comes back.
        server.editElsewhere(ids[4], ["phone": "999"])
        try await store.delete(Person.self, ids[4])
        try await store.pushAll(to: server) { _ in .conflict }
        try await expectExact(fixture, "a delete that lost a conflict")

        // A create the server refuses stays on the device as refused.
        ids.append(try await store.create(Person(name: "refused")))
        try await store.pushAll(to: server) { _ in .rejected }
        try await expectExact(fixture, "a refused create")

        let newcomers = (0..<3).map { _ in UUID() }
        let page = PullResponse(
            changes: newcomers.enumerated().map { pulled($1, version: Int64(500 + $0)) } + [pulled(ids[0], version: 600, deleted: true)],
            cursor: PullCursor(rawValue: "c"), hasMore: false, serverTime: time)
        try await store.applyPull(page, collections: ["people", "visits", "catalogs"])
        try await expectExact(fixture, "a pull page with new records and a tombstone")

        try await store.cacheRemote([
            WireRecord(
                collection: "people", uuid: UUID(), id: 900, version: 900, updatedAt: time, deleted: false, owner: "u-2",
                team: "t-1", data: ["name": .string("opened online")])
        ])
        try await expectExact(fixture, "caching a record opened online")

        try await store.beginResync()
        try await store.applyPull(
            PullResponse(
                changes: [pulled(newcomers[0], version: 700)], cursor: PullCursor(rawValue: "d"), hasMore: false, serverTime: time),
            collections: ["people", "visits", "catalogs"])
        try await expectExact(fixture, "a full re-download that dropped records")
    }
}
