import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// A local-only collection with every kind of property an app queries.
private struct Inspection: SyncRecord, Equatable {
    static let collection = "inspections"

    enum Priority: String, Codable, CaseIterable { case low, urgent }
    struct Address: Codable, Equatable {
        var city: String
        var postcode: String?
    }

    var title: String
    var inspectedAt: Date
    var score: Int
    var passed: Bool
    var notes: String?
    var priority: Priority
    var address: Address
    var tags: [String]
    var inspector: RecordLink<Person>?

    /// Computed: not a stored field, so not queryable.
    var shouting: String { title.uppercased() }
}

/// A type with an enum the probe cannot make up (not `CaseIterable`).
private struct Parcel: SyncRecord, Equatable {
    static let collection = "parcels"
    enum Size: String, Codable { case small, large }
    var label: String
    var size: Size
}

private let descriptors = [
    Person.descriptor, CollectionDescriptor(name: Inspection.collection), CollectionDescriptor(name: Parcel.collection),
]

/// Typed queries name properties by key path, or by stored name checked
/// against the type: a typo or a computed property fails plainly, never
/// a silently empty list.
@Suite("Key path queries", .timeLimit(.minutes(2)))
struct KeyPathQueryTests {
    private func sample(_ store: LocalStore) async throws -> (ana: UUID, day: Date) {
        let day = Date(timeIntervalSince1970: 1_800_000_000)
        let ana = try await store.create(Person(name: "Ana"))
        let rows: [Inspection] = [
            Inspection(
                title: "Roof", inspectedAt: day, score: 7, passed: true, notes: nil, priority: .urgent,
                address: .init(city: "Rome", postcode: "00100"), tags: ["a"], inspector: RecordLink(ana)),
            Inspection(
                title: "Boiler", inspectedAt: day.addingTimeInterval(3600), score: 4, passed: false, notes: "leaks",
                priority: .low, address: .init(city: "Milan", postcode: nil), tags: [], inspector: nil),
            Inspection(
                title: "Stairs", inspectedAt: day.addingTimeInterval(7200.000_123), score: 9, passed: true, notes: "ok",
                priority: .low, address: .init(city: "Rome", postcode: nil), tags: [], inspector: nil),
        ]
        for row in rows { try await store.create(row) }
        return (ana, day)
    }

    private func titles(_ records: [LocalRecord<Inspection>]) -> [String] { records.map(\.value.title) }

    @Test(arguments: [false, true])
    func everyKindOfPropertyIsQueriedByKeyPath(sealed: Bool) async throws {
        let directory = try TemporaryDirectory()
        let store = try LocalStore(
            path: directory.path("device.sqlite"), collections: descriptors,
            cipher: sealed ? try AESGCMCipher(key: AESGCMCipher.makeKey()) : nil)
        let (ana, day) = try await sample(store)
        func query(_ filter: FieldFilter<Inspection>, _ order: [FieldOrder<Inspection>] = [.ascending(\.title)]) async throws -> [String] {
            titles(try await store.query(Inspection.self, where: filter, orderBy: order))
        }
        #expect(try await query(.equals(\.title, "Roof")) == ["Roof"])
        #expect(try await query(.greaterThan(\.inspectedAt, day)) == ["Boiler", "Stairs"], "dates compare in time order")
        #expect(try await query(.lessThan(\.score, 8) && .equals(\.passed, true)) == ["Roof"])
        #expect(try await query(.isNil(\.notes)) == ["Roof"])
        #expect(try await query(.equals(\.notes, nil)) == ["Roof"], "nil compares as an absent field")
        #expect(try await query(.contains(\.notes, "LEA")) == ["Boiler"])
        #expect(try await query(.equals(\.priority, .low)) == ["Boiler", "Stairs"], "enums compare by raw value")
        #expect(try await query(.equals(\.address.city, "Rome")) == ["Roof", "Stairs"], "a nested property")
        #expect(try await query(.isNil(\.address.postcode)) == ["Boiler", "Stairs"])
        #expect(try await query(.equals(\.inspector, RecordLink(ana))) == ["Roof"], "a typed link")
        #expect(try await query(!.equals(\.priority, .urgent) || .equals(\.score, 7)) == ["Boiler", "Roof", "Stairs"])
        #expect(try await query(.equals(\.passed, true), [.descending(\.inspectedAt)]) == ["Stairs", "Roof"])
        #expect(try await query(.equals("address.city", "Milan")) == ["Boiler"], "a stored name, checked")
        let exact = try await store.query(Inspection.self, where: .equals(\.inspectedAt, day.addingTimeInterval(7200.000_123)))
        #expect(titles(exact) == ["Stairs"], "a date to the microsecond")
    }

    @Test func aKeyPathThatIsNotOneStoredFieldFailsPlainly() async throws {
        let directory = try TemporaryDirectory()
        let store = try LocalStore(path: directory.path("device.sqlite"), collections: descriptors)
        _ = try await sample(store)
        await #expect(throws: StoreError.self) { try await store.query(Inspection.self, where: .equals(\.shouting, "ROOF")) }
        await #expect(throws: StoreError.self) { try await store.query(Inspection.self, where: .equals(\.tags.count, 1)) }
        do {
            _ = try await store.query(Inspection.self, where: .equals(\.shouting, "ROOF"))
        } catch let error as StoreError {
            guard case .invalidQuery(let problem) = error else { Issue.record("\(error)"); return }
            #expect(problem.contains("computed"), "\(problem)")
        }
    }

    @Test func aMistypedFieldNameIsRefusedAtTheCall() async throws {
        let directory = try TemporaryDirectory()
        let store = try LocalStore(path: directory.path("device.sqlite"), collections: descriptors)
        _ = try await sample(store)
        do {
            _ = try await store.query(Inspection.self, where: .equals("titel", "Roof"))
            Issue.record("a field the type does not have must be refused")
        } catch let error as StoreError {
            guard case .invalidQuery(let problem) = error else { Issue.record("\(error)"); return }
            #expect(problem.contains("'titel'") && problem.contains("inspected_at"), "names the fields there are: \(problem)")
        }
        await #expect(throws: StoreError.self) { try await store.query(Inspection.self, orderBy: [.field("scroe")]) }
        // The untyped query names any stored field, declared or not.
        #expect(try await store.query(RecordQuery(Inspection.collection, filter: .equals("titel", "Roof"))).isEmpty)
    }

    @Test func aTypeTheProbeCannotBuildSaysWhichFieldAndStillQueriesByName() async throws {
        let directory = try TemporaryDirectory()
        let store = try LocalStore(path: directory.path("device.sqlite"), collections: descriptors)
        try await store.create(Parcel(label: "A", size: .large))
        do {
            _ = try await store.query(Parcel.self, where: .equals(\.label, "A"))
            Issue.record("the probe cannot make up a Size")
        } catch let error as StoreError {
            guard case .invalidQuery(let problem) = error else { Issue.record("\(error)"); return }
            #expect(problem.contains("size") && problem.contains("CaseIterable"), "\(problem)")
        }
        #expect(try await store.query(Parcel.self, where: .equals("size", "large")).map(\.value.label) == ["A"])
    }

    @Test func transactionsAndObservationsTakeKeyPaths() async throws {
        let directory = try TemporaryDirectory()
        let store = try LocalStore(path: directory.path("device.sqlite"), collections: descriptors)
        _ = try await sample(store)
        let moved = try await store.write { tx in
            let rome = try tx.query(Inspection.self, where: .equals(\.address.city, "Rome"))
            for record in rome { try tx.update(Inspection.self, record.uuid) { $0.address.city = "Turin" } }
            return rome.count
        }
        #expect(moved == 2)
        var turin = await store.observe(Inspection.self, where: .equals(\.address.city, "Turin"), orderBy: [.ascending(\.score)])
            .makeAsyncIterator()
        #expect(try await turin.next().map(titles) == ["Roof", "Stairs"])
        var broken = await store.observe(Inspection.self, where: .equals(\.shouting, "X")).makeAsyncIterator()
        await #expect(throws: StoreError.self) { _ = try await broken.next() }
        var count = await store.observeCount(Inspection.self, where: .equals(\.passed, false)).makeAsyncIterator()
        #expect(try await count.next() == 1)
    }
}
