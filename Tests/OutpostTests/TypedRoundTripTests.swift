import Foundation
import Outpost
import OutpostCore
import OutpostServer
import Testing

/// Every Codable type an app's model uses goes from one device through the
/// real server's validator to another device and back into the same typed
/// value.
@Suite("Typed values round-trip through the server", .timeLimit(.minutes(5)))
struct TypedRoundTripTests {
    enum Kind: String, Codable, Sendable { case home, work }
    enum Level: Int, Codable, Sendable { case low = 1, high = 3 }

    struct Address: Codable, Equatable, Sendable {
        var street: String
        var floor: Int?
    }

    /// A model with one property of each kind, camel-cased as apps name
    /// them: the fields are their snake-case names.
    struct Sample: SyncRecord, Equatable {
        static let collection = "samples"
        static let references = ["person": "people"]
        var title: String
        var count: Int
        var big: Int64
        var ratio: Double
        var price: Decimal
        var isDone: Bool
        var takenAt: Date
        var dueAt: Date?
        var site: URL
        var token: UUID
        var kind: Kind
        var level: Level
        var person: RecordLink<Person>
        var tags: [String]
        var homeAddress: Address
        var photoData: Data
        var note: String?
    }

    static let schema = CollectionSchema(
        name: "samples",
        fields: [
            "title": FieldSchema(.text, required: true), "count": FieldSchema(.integer), "big": FieldSchema(.integer),
            "ratio": FieldSchema(.number), "price": FieldSchema(.number), "is_done": FieldSchema(.boolean),
            "taken_at": FieldSchema(.timestamp, required: true), "due_at": FieldSchema(.timestamp),
            "site": FieldSchema(.text), "token": FieldSchema(.text), "kind": FieldSchema(.text),
            "level": FieldSchema(.integer), "person": FieldSchema(.reference(collection: "people")),
            "tags": FieldSchema(.json), "home_address": FieldSchema(.json), "photo_data": FieldSchema(.text),
            "note": FieldSchema(.text),
        ])

    /// A date to the microsecond (what the wire keeps).
    static func date(_ microsSince1970: Int64) -> Date {
        Date(timeIntervalSince1970: Double(microsSince1970) / 1_000_000)
    }

    static let samples: [Sample] = [
        Sample(
            title: "Ana \"Q\" é", count: 0, big: 9_007_199_254_740_993, ratio: 0.1, price: Decimal(string: "12.34")!,
            isDone: true, takenAt: date(1_796_000_000_123_456), dueAt: nil, site: URL(string: "https://example.org/a?b=c&d=%20")!,
            token: UUID(uuidString: "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0")!, kind: .work, level: .high,
            person: RecordLink(UUID()), tags: [], homeAddress: Address(street: "Via Roma 1", floor: 2), photoData: Data([0, 1, 254]),
            note: nil),
        Sample(
            title: "Привет, мир", count: -42, big: Int64.min + 1, ratio: -1e-7, price: Decimal(string: "0.1")!, isDone: false,
            takenAt: date(-86_400_000_001), dueAt: date(1_800_000_000_000_001), site: URL(string: "file:///tmp/x")!,
            token: UUID(), kind: .home, level: .low, person: RecordLink(UUID()), tags: ["a", "b,c", ""],
            homeAddress: Address(street: "Rua 3", floor: nil), photoData: Data(), note: "ок 🙂"),
        Sample(
            title: "x", count: Int(Int32.max), big: 0, ratio: 2500, price: Decimal(string: "1234567.891")!, isDone: true,
            takenAt: date(0), dueAt: date(999_999), site: URL(string: "https://例え.jp/パス")!, token: UUID(), kind: .work,
            level: .high, person: RecordLink(UUID()), tags: ["only"], homeAddress: Address(street: "", floor: -1),
            photoData: Data(repeating: 7, count: 300), note: ""),
    ]

    @Test(arguments: samples.indices)
    func aValueWrittenOnOneDeviceReadsTheSameOnAnother(_ index: Int) async throws {
        let config = try ServerConfig(collections: DefaultCollections.all + [Self.schema])
        let harness = try SyncHarness(config: config)
        let writer = try harness.device("u-1", name: "writer", collections: [Sample.descriptor])
        let reader = try harness.device("u-1", name: "reader", collections: [Sample.descriptor])
        let parent = try await writer.store.create(Person(name: "parent"))
        var sample = Self.samples[index]
        sample.person = RecordLink(parent)
        let uuid = try await writer.store.create(sample)
        let report = try await writer.engine.sync()
        #expect(report.rejected.isEmpty, "the server's validator accepts every field: \(report.rejected)")
        #expect(try await writer.store.get(Sample.self, uuid)?.syncState == .synced)

        try await reader.engine.sync()
        let read = try #require(try await reader.store.get(Sample.self, uuid))
        #expect(read.value == sample)
        // And what the writer holds after the server's answer is the same.
        #expect(try await writer.store.get(Sample.self, uuid)?.value == sample)
        #expect(try await reader.store.query(Sample.self).map(\.value) == [sample], "a list reads too")
    }

    @Test func fieldsAreTheSnakeCaseNamesOnTheWire() async throws {
        let config = try ServerConfig(collections: DefaultCollections.all + [Self.schema])
        let harness = try SyncHarness(config: config)
        let writer = try harness.device("u-1", collections: [Sample.descriptor])
        var sample = Self.samples[0]
        sample.person = RecordLink(try await writer.store.create(Person(name: "parent")))
        try await writer.store.create(sample)
        try await writer.engine.sync()
        let stored = try #require(try harness.serverRecords("samples").first?.data)
        let object = try #require(try JSONValue.parse(stored).objectValue)
        #expect(object["taken_at"] == .string("2026-11-30T00:53:20.123456Z"))
        #expect(object["is_done"] == .bool(true))
        #expect(object["home_address"] == .object(["street": .string("Via Roma 1"), "floor": .int(2)]))
        #expect(object["token"] == .string("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"))
        #expect(object["takenAt"] == nil && object["note"] == nil)
    }

    @Test func snakeCaseNames() {
        let cases = [
            ("createdAt", "created_at"), ("photoURL", "photo_url"), ("URLString", "url_string"), ("item2Count", "item2_count"),
            ("name", "name"), ("visited_at", "visited_at"), ("isDone", "is_done"), ("ID", "id"), ("café", "café"),
            ("étéNote", "été_note"), ("Zone", "zone"), ("zone@", "zone@"),
        ]
        for (name, field) in cases { #expect(FieldNaming.snakeCase(name) == field, "\(name)") }
    }

    /// A store written before dates were text kept them as numbers
    /// (seconds since 2001): they still read.
    @Test func datesStoredAsNumbersStillRead() throws {
        struct Stamp: Codable, Equatable { var at: Date }
        let read = try JSONValueCoding.decode(Stamp.self, from: .object(["at": .double(817_805_272.5)]))
        #expect(read.at == Date(timeIntervalSinceReferenceDate: 817_805_272.5))
    }
}
