import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

#if canImport(Observation)
import Observation
#endif

/// What a screen sees: a live read holds the current value before the first
/// draw, changes only when a commit changes what it reads, and covers the
/// lists an app shows beside its records (conflicts, refused, held).
@Suite("Live observation", .timeLimit(.minutes(2)))
struct LiveObservationTests {
    @Test func aCommitElsewhereSendsNothingAndAnUnchangedResultIsNotRepeated() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        try await store.create(Person(name: "Ana"))
        var iterator = await store.observe(Person.self, where: .equals("name", "Ana")).makeAsyncIterator()
        #expect(try await iterator.next()?.map(\.value.name) == ["Ana"])
        // A commit to the collection that leaves the filtered result as it was.
        try await store.create(Person(name: "Bea"))
        try await store.create(Visit(person: UUID().wireText, visitedAt: "2026-11-29T10:00:00Z"))
        let ana = try #require(try await store.query(Person.self, where: .equals("name", "Ana")).first)
        try await store.update(Person.self, ana.uuid) { $0.phone = "555" }
        let next = try await iterator.next()
        #expect(next?.first?.value.phone == "555", "the next value is the change, not a repeat of the same list")
    }

    @Test func limitSingleRecordAndCountAreLive() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        for name in ["Cy", "Ana", "Bea"] { try await store.create(Person(name: name)) }
        var top = await store.observe(Person.self, orderBy: [.field("name")], limit: 2).makeAsyncIterator()
        #expect(try await top.next()?.map(\.value.name) == ["Ana", "Bea"])
        let ana = try #require(try await store.query(Person.self, where: .equals("name", "Ana")).first)
        var one = await store.observe(Person.self, ana.uuid).makeAsyncIterator()
        #expect(try await one.next()??.value.name == "Ana")
        var count = await store.observeCount(Person.self).makeAsyncIterator()
        #expect(try await count.next() == 3)
        try await store.delete(Person.self, ana.uuid)
        #expect(try await top.next()?.map(\.value.name) == ["Bea", "Cy"])
        #expect(try await one.next() == .some(nil), "gone: nil")
        #expect(try await count.next() == 2)
    }

    @Test func conflictsRefusedAndHeldChangesAreObservable() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        var rejected = await device.store.observeRejected().makeAsyncIterator()
        var held = await device.store.observeHeld().makeAsyncIterator()
        var conflicts = await device.store.observeConflicts().makeAsyncIterator()
        #expect(try await rejected.next()?.isEmpty == true)
        #expect(try await held.next()?.isEmpty == true)
        #expect(try await conflicts.next()?.isEmpty == true)
        // A parent the server refuses (no name), then a child held behind it.
        let parent = try await device.store.create(in: "people", ["phone": .string("555")])
        try await device.engine.sync()
        #expect(try await rejected.next()?.map(\.uuid) == [parent])
        try await device.store.create(Visit(person: parent.wireText, visitedAt: "2026-11-29T10:00:00Z"))
        #expect(try await held.next()?.map(\.refusedParent.uuid) == [parent])
        // A conflict: someone else's edit wins over this device's.
        let ana = try await device.store.create(Person(name: "Ana"))
        try await device.engine.sync()
        let other = try harness.device("u-2", role: .coordinator)
        try await other.engine.sync()
        try await other.store.update(Person.self, ana) { $0.phone = "111" }
        try await other.engine.sync()
        try await device.store.update(Person.self, ana) { $0.phone = "222" }
        try await device.engine.sync()
        #expect(try await conflicts.next()?.map(\.record.uuid) == [ana])
    }

    #if canImport(Observation)
    @MainActor
    @Test func aLiveQueryHoldsTheCurrentValueAtOnceAndTellsSwiftUIOfChanges() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        try await store.create(Person(name: "Ana"))
        let people = await LiveQuery.records(Person.self, in: store, orderBy: [.field("name")])
        #expect(people.value.map(\.value.name) == ["Ana"], "no empty first frame")
        let count = await LiveQuery.count(Person.self, in: store)
        #expect(count.value == 1)

        // What SwiftUI does: read inside tracking, get told of a change.
        let (changes, announce) = AsyncStream<Void>.makeStream()
        withObservationTracking { _ = people.value } onChange: { announce.yield() }
        try await store.create(Person(name: "Bea"))
        try await eventually("the live query to announce the new record") {
            var iterator = changes.makeAsyncIterator()
            return await iterator.next() != nil
        }
        try await eventually("the live query to hold both records") { await people.value.count == 2 }
        #expect(people.value.map(\.value.name) == ["Ana", "Bea"])
        people.stop()
        await store.close()
        #expect(people.error == nil)
    }
    #endif

    @Test func aWriteTransactionQueriesWhatItWrote() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        try await store.create(Person(name: "Ana", section: 1))
        let moved = try await store.write { tx -> Int in
            try tx.create(Person(name: "Bea", section: 1))
            // Move everyone of section 1 to section 2, reading inside the transaction.
            let inSection = try tx.query(Person.self, where: .equals("section", 1))
            for record in inSection { try tx.update(Person.self, record.uuid) { $0.section = 2 } }
            return inSection.count
        }
        #expect(moved == 2, "the transaction saw its own create")
        #expect(try await store.query(Person.self, where: .equals("section", 2)).count == 2)
    }
}
