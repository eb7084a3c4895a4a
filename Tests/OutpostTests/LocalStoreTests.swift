import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

@Suite("Local store", .timeLimit(.minutes(5)))
struct LocalStoreTests {
    @Test func createGetUpdateDeleteTyped() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let id = try await store.create(Person(name: "Ana", section: 3))
        #expect(id.version == 7)
        var record = try #require(try await store.get(Person.self, id))
        #expect(record.value == Person(name: "Ana", section: 3))
        #expect(record.syncState == .pending)
        #expect(record.serverID == nil)
        #expect(record.localUpdatedAt == fixture.clock.now().addingTimeInterval(0).roundedToMicroseconds)

        fixture.clock.advance(by: 60)
        try await store.update(Person.self, id) {
            $0.section = nil
            $0.phone = "555"
        }
        record = try #require(try await store.get(Person.self, id))
        #expect(record.value == Person(name: "Ana", phone: "555"))
        #expect(try await store.outboxEntries()[0].data == ["name": "Ana", "phone": "555"])

        try await store.delete(Person.self, id)
        #expect(try await store.get(Person.self, id) == nil)
        await #expect(throws: StoreError.recordNotFound(collection: "people", uuid: id)) {
            try await store.update(Person.self, id) { $0.phone = "1" }
        }
    }

    @Test func typedUpdateNeverClearsFieldsTheTypeDoesNotKnow() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let server = ScriptedServer()
        let id = try await store.create(in: "people", ["name": "Ana", "address": "Via Roma 1"])
        try await store.pushAll(to: server)
        try await store.update(Person.self, id) { $0.phone = "555" }
        #expect(try await store.outboxEntries()[0].data == ["phone": "555"])
        #expect(try await store.get(in: "people", id)?.value["address"] == "Via Roma 1")
    }

    @Test func queryFiltersAndOrders() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        for (name, section) in [("Carla", 2), ("ana", 1), ("Bruno", 1), ("Ana Maria", 3)] {
            try await store.create(Person(name: name, section: section))
        }
        let sectionOne = try await store.query(Person.self, where: .equals("section", 1), orderBy: [.field("name")])
        #expect(sectionOne.map(\.value.name) == ["Bruno", "ana"])
        let anas = try await store.query(Person.self, where: .contains("name", "ana"), orderBy: [.field("name", ascending: false)])
        #expect(anas.map(\.value.name) == ["ana", "Ana Maria"])
        let combined = try await store.query(
            Person.self, where: .and([.greaterThan("section", 1), .not(.equals("name", "Carla"))]))
        #expect(combined.map(\.value.name) == ["Ana Maria"])
        let limited = try await store.query(RecordQuery("people", filter: .syncState(.pending), order: [.field("section")], limit: 2))
        #expect(limited.count == 2)
        // Wildcards in a search are literal.
        #expect(try await store.query(Person.self, where: .contains("name", "%")).isEmpty)
    }

    @Test func observationSendsTheCurrentValueThenOnePerRelevantCommit() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        try await store.create(Person(name: "Ana"))
        let stream = await store.observe(Person.self, orderBy: [.field("name")])
        var iterator = stream.makeAsyncIterator()
        #expect(try await iterator.next()?.map(\.value.name) == ["Ana"])
        try await store.create(Person(name: "Bea"))
        #expect(try await iterator.next()?.map(\.value.name) == ["Ana", "Bea"])
        let ana = try #require(try await store.query(Person.self, where: .equals("name", "Ana")).first)
        try await store.delete(Person.self, ana.uuid)
        #expect(try await iterator.next()?.map(\.value.name) == ["Bea"])
        await store.close()
        #expect(try await iterator.next() == nil, "the sequence ends when the store closes")
    }

    @Test func observingAnUnknownCollectionThrows() async throws {
        let fixture = try StoreFixture()
        var iterator = await fixture.store.observe(RecordQuery("invoices")).makeAsyncIterator()
        await #expect(throws: StoreError.unknownCollection("invoices")) { _ = try await iterator.next() }
    }

    @Test func reopeningKeepsOutboxClientIdAndSeq() async throws {
        let fixture = try StoreFixture()
        let server = ScriptedServer()
        let clientID = fixture.store.clientID
        try await fixture.store.create(Person(name: "Ana"))
        try await fixture.store.pushAll(to: server)
        try await fixture.store.create(Person(name: "Bea"))
        let lastSeq = try await fixture.store.lastSeq()
        #expect(lastSeq == 1)
        await fixture.store.close()

        let store = try fixture.reopen()
        #expect(store.clientID == clientID)
        #expect(try await store.lastSeq() == lastSeq)
        #expect(try await store.outboxEntries().count == 1)
        let batch = try #require(try await store.takePushBatch())
        #expect(batch.request.clientID == clientID)
        #expect(batch.request.mutations[0].seq == lastSeq + 1, "seq keeps increasing across restarts")
    }

    @Test func badInputIsAClearErrorAndChangesNothing() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        await #expect(throws: StoreError.unknownCollection("invoices")) {
            try await store.create(in: "invoices", ["x": 1])
        }
        await #expect(throws: StoreError.readOnlyCollection("catalogs")) {
            try await store.create(in: "catalogs", ["code": "x"])
        }
        await #expect(throws: StoreError.invalidName("name; DROP TABLE people")) {
            _ = try await store.query(Person.self, where: .equals("name; DROP TABLE people", 1))
        }
        let existing = try await store.create(Person(name: "Ana"))
        await #expect(throws: StoreError.recordExists(collection: "people", uuid: existing)) {
            try await store.create(Person(name: "Other"), uuid: existing)
        }
        // A transaction that fails half way leaves nothing behind.
        struct Abort: Error {}
        await #expect(throws: Abort.self) {
            try await store.write { tx in
                try tx.create(Person(name: "Bea"))
                try tx.update(Person.self, existing) { $0.phone = "1" }
                throw Abort()
            }
        }
        #expect(try await store.query(Person.self).map(\.value.name) == ["Ana"])
        #expect(try await store.outboxEntries().count == 1)
        #expect(try await store.integrityProblems() == [])

        #expect(throws: StoreError.invalidName("Bad-Name")) {
            _ = try LocalStore(path: fixture.directory.path("x.sqlite"), collections: [CollectionDescriptor(name: "Bad-Name")])
        }
        #expect(throws: StoreError.invalidName("outbox")) {
            _ = try LocalStore(path: fixture.directory.path("y.sqlite"), collections: [CollectionDescriptor(name: "outbox")])
        }
    }

    @Test func aClosedStoreSaysSo() async throws {
        let fixture = try StoreFixture()
        await fixture.store.close()
        await #expect(throws: StoreError.closed) { try await fixture.store.create(Person(name: "Ana")) }
    }

    @Test func aThousandConcurrentWritesAreAllThere() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let ids = try await withThrowingTaskGroup(of: UUID.self) { group in
            for index in 0..<1000 {
                group.addTask { try await store.create(Person(name: "Person \(index)", section: index)) }
            }
            var ids: Set<UUID> = []
            for try await id in group { ids.insert(id) }
            return ids
        }
        #expect(ids.count == 1000)
        let stored = try await store.query(Person.self)
        #expect(Set(stored.map(\.uuid)) == ids)
        #expect(Set(stored.compactMap(\.value.section)) == Set(0..<1000))
        #expect(try await store.outboxEntries().count == 1000)
        #expect(try await store.integrityProblems() == [])
    }
}

extension Date {
    /// Server timestamps carry microseconds; compare at that precision.
    var roundedToMicroseconds: Date {
        Date(timeIntervalSince1970: (timeIntervalSince1970 * 1_000_000).rounded(.down) / 1_000_000)
    }
}
