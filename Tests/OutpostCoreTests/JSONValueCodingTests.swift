import Foundation
import OutpostCore
import Testing

/// Typed records are encoded straight into JSON values; what comes out must
/// be what Foundation's coders (the wire's) would have made.
@Suite("Coding typed values as JSON values", .timeLimit(.minutes(5)))
struct JSONValueCodingTests {
    enum Kind: String, Codable { case home, work }

    struct Address: Codable, Equatable {
        var street: String
        var floor: Int?
    }

    struct Sample: Codable, Equatable {
        var name: String
        var nickname: String?
        var age: Int
        var big: Int64
        var small: UInt8
        var ratio: Double
        var flag: Bool
        var kind: Kind
        var tags: [String]
        var addresses: [Address]
        var scores: [String: Int]
        var seen: Date
        var photo: Data
        var site: URL
        var nested: [[Int]]
    }

    let sample = Sample(
        name: "Ana \"Q\" \u{e9}", nickname: nil, age: 41, big: 9_007_199_254_740_993, small: 7, ratio: 0.25, flag: true,
        kind: .work, tags: ["a", "b"], addresses: [Address(street: "Via Roma 1", floor: 2), Address(street: "Rua 3", floor: nil)],
        scores: ["x": 1, "y": -2], seen: Date(timeIntervalSinceReferenceDate: 12.5), photo: Data([0, 1, 254]),
        site: URL(string: "https://example.org/a?b=c")!, nested: [[1], [], [2, 3]])

    @Test func encodingMatchesTheWiresCoders() throws {
        let direct = try JSONValueCoding.encode(sample)
        let viaText = try JSONValue.parse(WireCoding.encode(sample))
        #expect(direct == viaText)
        #expect(direct.objectValue?["nickname"] == nil)
        #expect(direct.objectValue?["photo"] == .string("AAH+"))
    }

    @Test func decodingRoundTripsAndReadsWhatTheWireWrote() throws {
        let direct = try JSONValueCoding.decode(Sample.self, from: JSONValueCoding.encode(sample))
        #expect(direct == sample)
        let fromText = try JSONValueCoding.decode(Sample.self, from: JSONValue.parse(WireCoding.encode(sample)))
        #expect(fromText == sample)
    }

    @Test func wholeDoublesStayDoublesAndIntegersAcceptWholeNumbers() throws {
        struct Money: Codable, Equatable {
            var amount: Double
            var count: Int
        }
        let value = try JSONValueCoding.encode(Money(amount: 2500, count: 3))
        #expect(value == .object(["amount": .double(2500), "count": .int(3)]))
        // A stored 2500 (an integer) still reads as a Double, and 3.0 as an Int.
        let read = try JSONValueCoding.decode(Money.self, from: .object(["amount": .int(2500), "count": .double(3)]))
        #expect(read == Money(amount: 2500, count: 3))
    }

    @Test func badValuesAreRefusedNamingTheField() throws {
        struct Money: Codable { var amount: Double }
        #expect(throws: EncodingError.self) { _ = try JSONValueCoding.encode(Money(amount: .infinity)) }

        #expect(throws: WireError(path: "addresses[1].street", problem: "is missing")) {
            var object = try #require(try JSONValueCoding.encode(sample).objectValue)
            object["addresses"] = .array([.object(["street": .string("x")]), .object(["floor": .int(1)])])
            _ = try JSONValueCoding.decode(Sample.self, from: .object(object))
        }
        #expect(throws: WireError(path: "age", problem: "must not be null")) {
            var object = try #require(try JSONValueCoding.encode(sample).objectValue)
            object["age"] = .null
            _ = try JSONValueCoding.decode(Sample.self, from: .object(object))
        }
        for (field, bad) in [("age", JSONValue.string("41")), ("small", .int(300)), ("age", .double(1.5)), ("kind", .string("boat")),
            ("flag", .int(1)), ("ratio", .string("0.25")), ("big", .double(0.5)), ("name", .int(3)), ("nickname", .bool(true))] {
            var object = try #require(try JSONValueCoding.encode(sample).objectValue)
            object[field] = bad
            let error = try #require(throws: WireError.self, "\(field) = \(bad)") {
                _ = try JSONValueCoding.decode(Sample.self, from: .object(object))
            }
            #expect(error.path == field, "\(field) = \(bad)")
        }
    }

    /// An optional field reads as nil when absent or null, its value when
    /// present, and a value of the wrong kind is refused naming the field.
    @Test func optionalFieldsReadAbsentNullAndPresent() throws {
        struct Contact: Codable, Equatable {
            var name: String
            var phone: String?
            var floor: Int?
            var active: Bool?
            var seen: Date?
            var address: Address?
        }
        let full = Contact(
            name: "Ana", phone: "555", floor: 3, active: false, seen: Date(timeIntervalSinceReferenceDate: 1),
            address: Address(street: "Via Roma 1", floor: nil))
        #expect(try JSONValueCoding.decode(Contact.self, from: JSONValueCoding.encode(full)) == full)
        let bare = Contact(name: "Ana")
        #expect(try JSONValueCoding.encode(bare) == .object(["name": .string("Ana")]))
        #expect(try JSONValueCoding.decode(Contact.self, from: .object(["name": .string("Ana")])) == bare)
        let nulls: JSONObject = ["name": .string("Ana"), "phone": .null, "floor": .null, "active": .null, "seen": .null, "address": .null]
        #expect(try JSONValueCoding.decode(Contact.self, from: .object(nulls)) == bare)
        for (field, bad) in [("phone", JSONValue.int(5)), ("floor", .string("3")), ("active", .string("yes")), ("seen", .bool(true))] {
            let error = try #require(throws: WireError.self, "\(field) = \(bad)") {
                _ = try JSONValueCoding.decode(Contact.self, from: .object(["name": .string("Ana"), field: bad]))
            }
            #expect(error.path == field, "\(field) = \(bad)")
        }
    }

    /// Under snake case only the names that change move; two properties
    /// that name the same field are refused rather than one lost.
    @Test func snakeCaseRenamesFieldsAndRefusesTwoPropertiesForOneField() throws {
        struct Visit: Codable, Equatable {
            var visitedAt: String
            var photoURL: String?
            var note: String
        }
        let visit = Visit(visitedAt: "2026-12-05", photoURL: "https://example.org/p.jpg", note: "n")
        let encoded = try JSONValueCoding.encode(visit, fieldNames: .snakeCase)
        #expect(
            encoded == .object(["visited_at": .string("2026-12-05"), "photo_url": .string("https://example.org/p.jpg"), "note": .string("n")]))
        #expect(try JSONValueCoding.decode(Visit.self, from: encoded, fieldNames: .snakeCase) == visit)

        struct Twice: Codable {
            var createdAt: String
            var created_at: String
        }
        #expect(throws: EncodingError.self) { _ = try JSONValueCoding.encode(Twice(createdAt: "a", created_at: "b"), fieldNames: .snakeCase) }
        #expect(try JSONValueCoding.encode(Twice(createdAt: "a", created_at: "b")).objectValue?.count == 2, "as written, both stay")
    }
}
