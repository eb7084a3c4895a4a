import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// The server's own byte writers (a record from its row, a page around its
/// changes, a removal, the live stream's events) against JSON written out by
/// hand: the same bytes as before their keys came from `WireKey`. The
/// client's readers read these forms in OutpostCoreTests' `WireBytesTests`.
@Suite("Server wire bytes", .timeLimit(.minutes(2)))
struct ServerWireBytesTests {
    static let time = "2026-11-29T10:00:00.123456Z"

    static let storedWire =
        #"{"collection":"people","uuid":"0190a3c5-aaaa-7000-8000-000000000001","id":4711,"version":88123,"#
        + #""updated_at":"2026-11-29T10:00:00.123456Z","deleted":false,"owner":"u-17","team":"t-3","data":{"name":"Ana"},"#
        + #""device_time":"2026-11-29T10:00:00.123456Z"}"#
    static let tombstoneWire =
        #"{"collection":"people","uuid":"0190a3c5-aaaa-7000-8000-000000000003","id":4712,"version":88130,"#
        + #""updated_at":"2026-11-29T10:00:00.123456Z","deleted":true,"owner":"u-17","team":"t-3","data":null}"#

    @Test func aRecordIsWrittenFromItsRowAsBefore() {
        let stored = ServerRecord(
            id: 4711, collection: "people", uuid: "0190a3c5-aaaa-7000-8000-000000000001", version: 88123, updatedAt: Self.time,
            deleted: false, owner: "u-17", team: "t-3", createdByUser: "u-17", createdByClient: "c", dataText: #"{"name":"Ana"}"#,
            deviceTime: Self.time)
        // A tombstone's stored data is never written: null.
        let tombstone = ServerRecord(
            id: 4712, collection: "people", uuid: "0190a3c5-aaaa-7000-8000-000000000003", version: 88130, updatedAt: Self.time,
            deleted: true, owner: "u-17", team: "t-3", createdByUser: "u-17", createdByClient: "c", dataText: #"{"name":"Ana"}"#,
            deviceTime: nil)
        var out: [UInt8] = []
        stored.appendJSON(to: &out)
        #expect(String(decoding: out, as: UTF8.self) == Self.storedWire)
        out = []
        tombstone.appendJSON(to: &out)
        #expect(String(decoding: out, as: UTF8.self) == Self.tombstoneWire)
    }

    @Test func aPageIsPutTogetherAsBefore() {
        var body = PullService.Page.opening
        body.append(contentsOf: Self.storedWire.utf8)
        body.append(UInt8(ascii: ","))
        // A removal: its collection and uuid, then the end the feed query's writer appends.
        body.append(contentsOf: #"{"collection":"people","uuid":"0190a3c5-aaaa-7000-8000-000000000004""#.utf8)
        body.append(contentsOf: PullService.removalEnd)
        PullService.Page.close(&body, cursor: "c-88130", hasMore: true, serverTime: ServerTimestamp(rawValue: Self.time))
        let expected =
            #"{"changes":[\#(Self.storedWire),"#
            + #"{"collection":"people","uuid":"0190a3c5-aaaa-7000-8000-000000000004","deleted":true,"removed":true}],"#
            + #""cursor":"c-88130","has_more":true,"server_time":"2026-11-29T10:00:00.123456Z"}"#
        #expect(String(decoding: body, as: UTF8.self) == expected)
        var last = PullService.Page.opening
        PullService.Page.close(&last, cursor: "c", hasMore: false, serverTime: ServerTimestamp(rawValue: Self.time))
        #expect(String(decoding: last, as: UTF8.self) == #"{"changes":[],"cursor":"c","has_more":false,"server_time":"2026-11-29T10:00:00.123456Z"}"#)
    }

    @Test func theLiveStreamsEventsAreWrittenAsBefore() throws {
        let live = try LiveServer(.sqlite, clock: ManualWallClock(Date(timeIntervalSince1970: 1_795_946_400)))
        #expect(
            String(decoding: LiveStream.heartbeat(live.server), as: UTF8.self)
                == "event: heartbeat\ndata: {\"server_time\":\"2026-11-29T10:00:00.000000Z\"}\n\n")
        #expect(String(decoding: LiveStream.event(.changes, Array("{}".utf8)), as: UTF8.self) == "event: changes\ndata: {}\n\n")
        #expect(String(decoding: LiveStream.event(.error, Array("{}".utf8)), as: UTF8.self) == "event: error\ndata: {}\n\n")
    }
}
