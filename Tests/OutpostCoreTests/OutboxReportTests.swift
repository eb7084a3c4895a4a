import OutpostCore
import Testing

/// The `Outpost-Outbox` header a device sends on every request.
@Suite("Outbox report header")
struct OutboxReportTests {
    @Test func aReportIsWrittenAndReadBack() {
        #expect(OutboxReport(unsent: 0, oldestSeconds: nil).headerValue == "0")
        #expect(OutboxReport(unsent: 12, oldestSeconds: 3600).headerValue == "12; oldest=3600")
        // An empty outbox has no oldest change, whatever was passed.
        #expect(OutboxReport(unsent: 0, oldestSeconds: 50).headerValue == "0")
        // A change made "in the future" by a clock set back counts as new, not negative.
        #expect(OutboxReport(unsent: 1, oldestSeconds: -20).headerValue == "1; oldest=0")
        for value in ["0", "12; oldest=3600", "7;oldest=1"] {
            let report = OutboxReport(headerValue: value)
            #expect(report != nil, "\(value)")
            #expect(report.map { OutboxReport(headerValue: $0.headerValue) == $0 } == true)
        }
        #expect(OutboxReport(headerValue: " 7 ; oldest=1 ") == OutboxReport(unsent: 7, oldestSeconds: 1))
    }

    @Test(arguments: ["", "x", "-1", "3; oldest", "3; oldest=", "3; oldest=-5", "3; newest=5", "3; oldest=5; more=1", "1e3"])
    func whatIsNotAReportIsIgnored(_ value: String) {
        #expect(OutboxReport(headerValue: value) == nil)
    }
}
