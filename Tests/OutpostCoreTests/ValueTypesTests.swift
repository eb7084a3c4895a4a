import Foundation
import OutpostCore
import OutpostTesting
import Testing

@Suite("JSON values, timestamps and ids", .timeLimit(.minutes(5)))
struct ValueTypesTests {
    @Test func integersStayIntegers() throws {
        let value = try JSONValue.parse(#"{"section": 3, "ratio": 0.5, "ok": true, "none": null, "list": [1, "a"]}"#)
        #expect(value.objectValue?["section"] == .int(3))
        #expect(value.objectValue?["ratio"] == .double(0.5))
        #expect(value.objectValue?["ok"] == .bool(true))
        #expect(try value.jsonText() == #"{"list":[1,"a"],"none":null,"ok":true,"ratio":0.5,"section":3}"#)
    }

    @Test func patchesApplyAndDiff() {
        let old: JSONObject = ["name": "Ana", "phone": "1", "notes": "x"]
        let new = old.applyingPatch(["phone": "555", "notes": .null, "section": 4])
        #expect(new == ["name": "Ana", "phone": "555", "section": 4])
        #expect(new.patch(from: old) == ["phone": "555", "notes": .null, "section": 4])
        #expect(old.patch(from: old).isEmpty)
    }

    @Test func serverTimestampFormatsMicrosecondsInUTC() {
        let date = Date(timeIntervalSince1970: 1_796_112_000.123456)
        let stamp = ServerTimestamp(date)
        #expect(stamp.rawValue == "2026-12-01T08:00:00.123456Z")
        #expect(abs((stamp.date?.timeIntervalSince1970 ?? 0) - date.timeIntervalSince1970) < 0.000_01)
        #expect(ServerTimestamp(Date(timeIntervalSince1970: 0)).rawValue == "1970-01-01T00:00:00.000000Z")
        #expect(ServerTimestamp(rawValue: "2026-11-29T10:00:00+02:00").date == ServerTimestamp(rawValue: "2026-11-29T08:00:00Z").date)
        #expect(ServerTimestamp(rawValue: "2026-13-29T10:00:00Z").date == nil)
    }

    @Test func uuidV7IsVersionedOrderedAndTimed() {
        let clock = ManualWallClock(Date(timeIntervalSince1970: 1_796_000_000))
        let ids = UUIDv7Generator.seeded(7, clock: clock)
        var previous = ids.next()
        #expect(previous.version == 7)
        #expect(previous.v7Milliseconds == 1_796_000_000_000)
        #expect((previous.uuid.8 & 0xC0) == 0x80, "RFC 4122 variant")
        for step in 0..<10_000 {
            if step % 1000 == 0 { clock.advance(by: 0.001) }
            let next = ids.next()
            #expect(next.wireText > previous.wireText, "ids made later sort later")
            previous = next
        }
        // A clock that steps back never makes ids go backwards.
        clock.advance(by: -3600)
        #expect(ids.next().wireText > previous.wireText)
    }

    @Test func seededIdsRepeat() {
        let first = UUIDv7Generator.seeded(42, clock: ManualWallClock())
        let second = UUIDv7Generator.seeded(42, clock: ManualWallClock())
        #expect((0..<5).map { _ in first.next() } == (0..<5).map { _ in second.next() })
    }
}

@Suite("UUID text", .timeLimit(.minutes(5)))
struct UUIDTextTests {
    @Test func wireTextMatchesFoundationLowercased() {
        for _ in 0..<1000 {
            let uuid = UUID()
            #expect(uuid.wireText == uuid.uuidString.lowercased())
            #expect(UUID.fromWire(uuid.wireText) == uuid)
            #expect(UUID.fromWire(uuid.uuidString) == uuid)
        }
        for bad in ["", "0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6", "0190a3c4x5b6d-7e8f-9a0b-1c2d3e4f5a6b", "0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6g"] {
            #expect(UUID.fromWire(bad) == nil, "\(bad)")
        }
    }
}

/// The library's own SHA-256 names blobs; it must agree with the standard's
/// test vectors whatever the sizes it is fed in.
@Suite("SHA-256")
struct SHA256Tests {
    @Test func standardVectors() {
        #expect(SHA256.hex(of: [UInt8]()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex(of: Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            SHA256.hex(of: Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(
            SHA256.hex(of: [UInt8](repeating: 0x61, count: 1_000_000))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func piecesOfAnySizeGiveTheSameDigest() {
        var random = SeededRandom(seed: 9)
        let bytes = (0..<10_000).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let whole = SHA256.hex(of: bytes)
        for piece in [1, 3, 55, 56, 63, 64, 65, 1000] {
            var hash = SHA256()
            var index = 0
            while index < bytes.count {
                hash.update(bytes[index..<min(bytes.count, index + piece)])
                index += piece
            }
            #expect(hash.finishHex() == whole, "pieces of \(piece)")
        }
        // Every length around the padding boundary.
        for length in 50...70 {
            let prefix = Array(bytes.prefix(length))
            var hash = SHA256()
            hash.update(prefix)
            #expect(hash.finishHex() == SHA256.hex(of: prefix))
        }
    }

    @Test func attachmentValuesAreCheckedWhenMade() {
        #expect(AttachedFile(sha256: String(repeating: "A", count: 64), size: 1, contentType: "image/png")?.sha256 == String(repeating: "a", count: 64))
        #expect(AttachedFile(sha256: "abc", size: 1, contentType: "image/png") == nil)
        #expect(AttachedFile(sha256: String(repeating: "a", count: 64), size: -1, contentType: "image/png") == nil)
        #expect(AttachedFile(sha256: String(repeating: "a", count: 64), size: 1, contentType: "") == nil)
        let value = AttachedFile(sha256: String(repeating: "b", count: 64), size: 5, contentType: "image/jpeg")!
        #expect(AttachedFile(value.jsonValue) == value)
        #expect(AttachedFile.all(in: ["photo": value.jsonValue, "notes": .string("x")]) == ["photo": value])
    }
}
