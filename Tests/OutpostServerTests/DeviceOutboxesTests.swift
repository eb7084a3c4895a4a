import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// What devices say of their outboxes (`Outpost-Outbox`), kept per server
/// for ten minutes and shown in `/metrics`; a device whose oldest change
/// is over an hour old is logged once an hour.
@Suite("Device outboxes", .timeLimit(.minutes(2)))
struct DeviceOutboxesTests {
    static let start = Date(timeIntervalSince1970: 1_796_000_000)

    static func request(device: UUID, report: String?) -> HTTPRequest {
        var headers = ["Outpost-Device": device.wireText]
        if let report { headers["Outpost-Outbox"] = report }
        return HTTPRequest(method: "GET", path: "/v1/pull", headers: headers)
    }

    @Test func reportsAreAgedToNowAndForgottenAfterTheWindow() {
        let lines = Locked<[[String: String]]>([])
        let outboxes = DeviceOutboxes { _, fields in lines.withLock { $0.append(fields) } }
        let (a, b, c) = (UUID(), UUID(), UUID())
        outboxes.note(Self.request(device: a, report: "3; oldest=60"), user: "ana", at: Self.start)
        outboxes.note(Self.request(device: b, report: "0"), user: "bea", at: Self.start)
        outboxes.note(Self.request(device: c, report: "not a report"), user: "cai", at: Self.start)
        outboxes.note(Self.request(device: c, report: nil), user: "cai", at: Self.start)
        #expect(outboxes.summary(at: Self.start + 30) == .init(devices: 2, largestUnsent: 3, oldestSeconds: 90, stuck: 0))

        // The device's newer report replaces its older one.
        outboxes.note(Self.request(device: a, report: "0"), user: "ana", at: Self.start + 40)
        #expect(outboxes.summary(at: Self.start + 50) == .init(devices: 2, largestUnsent: 0, oldestSeconds: 0, stuck: 0))
        // Ten minutes without a word: forgotten.
        #expect(outboxes.summary(at: Self.start + 40 + DeviceOutboxes.window + 1).devices == 0)
        #expect(lines.current.isEmpty)
    }

    @Test func aDeviceWhoseChangesAreOverAnHourOldIsCountedAndLoggedOnceAnHour() {
        let lines = Locked<[[String: String]]>([])
        let outboxes = DeviceOutboxes { _, fields in lines.withLock { $0.append(fields) } }
        let device = UUID()
        var now = Self.start
        // Every five minutes for three hours, its oldest change older each time.
        for step in 0..<36 {
            outboxes.note(Self.request(device: device, report: "\(10 + step); oldest=\(1800 + 300 * step)"), user: "ana", at: now)
            now += 300
        }
        let summary = outboxes.summary(at: now)
        #expect(summary.stuck == 1 && summary.largestUnsent == 45 && summary.oldestSeconds == 1800 + 300 * 36)
        // Stuck from the 7th report on (2 h 35 min in all): told at its first, then an hour and two hours later.
        #expect(lines.current.count == 3)
        #expect(lines.current.first == ["user": "ana", "device": device.wireText, "unsent": "17", "oldest_seconds": "3900"])
        #expect(lines.current.map { $0["oldest_seconds"] } == ["3900", "7500", "11100"])
    }

    @Test func onlyAnAuthenticatedRequestIsNotedAndTheMetricsShowIt() async throws {
        let clock = ManualWallClock(Self.start)
        let live = try LiveServer(.sqlite, clock: clock)
        let device = UUID()
        var anonymous = RouteRequest(Self.request(device: device, report: "5; oldest=4000"), canWait: false)
        try DeviceSightingNote().prepare(&anonymous, server: live.server)
        #expect(live.server.outboxes.summary(at: clock.now()).devices == 0)

        var signed = anonymous
        signed.principal = Principal(user: "ana", role: .field, team: "t-1")
        try DeviceSightingNote().prepare(&signed, server: live.server)
        clock.advance(by: 100)
        let text = try await live.get("/metrics", token: try live.token("admin-1", .admin)).text
        #expect(MetricsTests.value(text, "outpost_device_outboxes_reporting") == 1)
        #expect(MetricsTests.value(text, "outpost_device_outbox_unsent_max") == 5)
        #expect(MetricsTests.value(text, "outpost_device_outbox_oldest_seconds_max") == 4100)
        #expect(MetricsTests.value(text, "outpost_device_outboxes_stuck") == 1)
        #expect(!text.contains(device.wireText), "no device id becomes a label")
    }
}
