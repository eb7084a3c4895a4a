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
