import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// Payloads encrypted at rest behind a cipher protocol (AES-GCM).
@Suite("Encryption at rest", .timeLimit(.minutes(5)))
struct EncryptionTests {
    let secret = "Lucía Marchetti, HIV clinic"

    @Test func aesGCMRoundTripsAndRefusesWhatWasAlteredOrSealedWithAnotherKey() throws {
        let cipher = try AESGCMCipher(key: AESGCMCipher.makeKey())
        for plaintext in [[], Array("x".utf8), Array(String(repeating: "ab", count: 5_000).utf8)] {
            let sealed = try cipher.seal(plaintext)
            #expect(sealed.count == plaintext.count + 28)
            #expect(try cipher.open(sealed) == plaintext)
        }
        let sealed = try cipher.seal(Array(secret.utf8))
        #expect(try cipher.seal(Array(secret.utf8)) != sealed, "a fresh nonce every time")
        for index in [0, 12, sealed.count - 1] {
            var altered = sealed
            altered[index] ^= 1
            #expect(throws: CipherError.notSealed) { _ = try cipher.open(altered) }
        }
        #expect(throws: CipherError.notSealed) { _ = try cipher.open(Array(sealed.prefix(20))) }
        #expect(throws: CipherError.notSealed) { _ = try AESGCMCipher(key: AESGCMCipher.makeKey()).open(sealed) }
        #expect(throws: CipherError.badKey) { _ = try AESGCMCipher(key: [1, 2, 3]) }
    }

    /// Every byte of the database and its WAL.
    func fileBytes(_ path: String) throws -> Data {
        var all = Data()
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: path + suffix) {
            all.append(try Data(contentsOf: URL(fileURLWithPath: path + suffix)))
        }
        return all
    }

    @Test func noRecordFieldQueuedChangeOrConflictIsStoredInClear() async throws {
        let key = AESGCMCipher.makeKey()
        let server = ScriptedServer()
        var paths: [Bool: String] = [:]
        let directory = try TemporaryDirectory()
        for sealed in [false, true] {
            let path = directory.path(sealed ? "sealed.sqlite" : "plain.sqlite")
            paths[sealed] = path
            let store = try LocalStore(
                path: path, collections: [Person.descriptor, Visit.descriptor], cipher: sealed ? try AESGCMCipher(key: key) : nil)
            let id = try await store.create(Person(name: secret, phone: "555-0101"))
            try await store.pushAll(to: server)
            server.editElsewhere(id, ["phone": .string("555-0999")])
            try await store.update(Person.self, id) { $0.name = secret + " (edited)" }
            try await store.pushAll(to: server) { _ in .conflict }
            try await store.update(Person.self, id) { $0.phone = "555-0102" }
            try await store.applyPull(
                PullResponse(
                    changes: [
                        .record(
                            WireRecord(
                                collection: "people", uuid: UUID(), id: 77, version: 900,
                                updatedAt: ServerTimestamp(rawValue: "2026-11-29T10:00:00.000000Z"), deleted: false, owner: "u-2",
                                team: "t-1", data: ["name": .string(secret + " pulled")]))
                    ], cursor: PullCursor(rawValue: "c"), hasMore: false, serverTime: ServerTimestamp(rawValue: "2026-11-29T10:00:00.000000Z")),
                collections: ["people", "visits", "catalogs"])

            // Everything reads back the same either way.
            #expect(try await store.get(Person.self, id)?.value.phone == "555-0102")
            #expect(try await store.conflicts().first?.localChange?["name"] == .string(secret + " (edited)"))
            #expect(try await store.outboxEntries().first?.data?["phone"] == .string("555-0102"))
            #expect(try await store.query(RecordQuery("people", filter: .contains("name", "pulled"))).count == 1)
            let bytes = try fileBytes(path)
            await store.close()
            let found = bytes.range(of: Data("Marchetti".utf8)) != nil
            #expect(found == !sealed, sealed ? "nothing in clear at rest" : "the check can see clear text")
        }

        // Opened without its key, or with another, the store says why instead of showing garbage.
        let sealedPath = try #require(paths[true])
        #expect(throws: StoreError.encrypted) { _ = try LocalStore(path: sealedPath, collections: [Person.descriptor, Visit.descriptor]) }
        let wrong = try LocalStore(
            path: sealedPath, collections: [Person.descriptor, Visit.descriptor], cipher: try AESGCMCipher(key: AESGCMCipher.makeKey()))
        await #expect(throws: CipherError.notSealed) { _ = try await wrong.query(RecordQuery("people")) }
        await wrong.close()
    }

    /// Random records and random queries: the sealed store (queries run in
    /// Swift) answers exactly as the plain one (queries run by SQLite).
    @Test func queriesOverSealedRecordsAnswerAsSQLiteDoes() async throws {
        var random = SeededRandom(seed: 42)
        let directory = try TemporaryDirectory()
        let plain = try LocalStore(path: directory.path("plain.sqlite"), collections: [Person.descriptor])
        let sealed = try LocalStore(
            path: directory.path("sealed.sqlite"), collections: [Person.descriptor], cipher: try AESGCMCipher(key: AESGCMCipher.makeKey()))
        let names = ["Ana", "ana", "Bruno", "Çelik", "zoe", "Zoë", "", "10", "b"]
        func value() -> JSONValue? {
            switch random.next() % 8 {
            case 0: return nil
            case 1: return .null
            case 2: return .int(Int64(random.next() % 7) - 3)
            case 3: return .double(Double(Int(random.next() % 9) - 4) / 2)
            case 4: return .bool(random.next() % 2 == 0)
            default: return .string(names[Int(random.next() % UInt64(names.count))])
            }
        }
        for _ in 0..<120 {
            var data: JSONObject = [:]
            for field in ["name", "phone", "section"] { if let value = value() { data[field] = value } }
            let id = UUID()
            try await plain.create(in: "people", data, uuid: id)
            try await sealed.create(in: "people", data, uuid: id)
        }
        let fields = ["name", "phone", "section", "missing"]
        func filter(_ depth: Int) -> RecordFilter {
            let field = fields[Int(random.next() % UInt64(fields.count))]
            let operand = value() ?? .null
            switch random.next() % (depth > 0 ? 10 : 7) {
            case 0: return .equals(field, operand)
            case 1: return .notEquals(field, operand)
            case 2: return .lessThan(field, operand)
            case 3: return .greaterThan(field, operand)
            case 4: return .contains(field, ["a", "A", "1", "", "o"][Int(random.next() % 5)])
            case 5: return .isNull(field)
            case 6: return .syncState(.pending)
            case 7: return .and([filter(depth - 1), filter(depth - 1)])
            case 8: return .or([filter(depth - 1), filter(depth - 1)])
            default: return .not(filter(depth - 1))
            }
        }
        for round in 0..<300 {
            let order: [RecordOrder] = (0..<Int(random.next() % 3)).map { _ in
                .field(fields[Int(random.next() % UInt64(fields.count))], ascending: random.next() % 2 == 0)
            }
            let query = RecordQuery(
                "people", filter: round % 10 == 0 ? nil : filter(2), order: order, limit: round % 4 == 0 ? Int(random.next() % 20) : nil)
            let expected = try await plain.query(query).map(\.uuid)
            let answered = try await sealed.query(query).map(\.uuid)
            #expect(answered == expected, "\(query)")
        }
        await #expect(throws: StoreError.invalidName("bad name")) {
            _ = try await sealed.query(RecordQuery("people", filter: .equals("bad name", .int(1))))
        }
    }

    @Test func turningEncryptionOnSealsWhatWasStoredBefore() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let plain = try LocalStore(path: path, collections: [Person.descriptor, Visit.descriptor])
        let id = try await plain.create(Person(name: secret))
        await plain.close()
        #expect(try fileBytes(path).range(of: Data("Marchetti".utf8)) != nil)

        let cipher = try AESGCMCipher(key: AESGCMCipher.makeKey())
        let sealed = try LocalStore(path: path, collections: [Person.descriptor, Visit.descriptor], cipher: cipher)
        #expect(try await sealed.get(Person.self, id)?.value.name == secret)
        #expect(try await sealed.outboxEntries().first?.data?["name"] == .string(secret))
        await sealed.close()
        #expect(try fileBytes(path).range(of: Data("Marchetti".utf8)) == nil, "the earlier text is sealed and gone from the files")
        let reopened = try LocalStore(path: path, collections: [Person.descriptor, Visit.descriptor], cipher: cipher)
        #expect(try await reopened.query(Person.self, where: .equals("name", .string(secret))).count == 1)
        await reopened.close()
    }
}
