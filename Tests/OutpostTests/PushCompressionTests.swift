import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting
import Testing

/// The engine deflates its pushes once the server's answers say it reads
/// deflate, and sends them plain when they do not, or when an encoded push
/// is turned down whole: no change is lost or refused for it.
@Suite("Compressed pushes", .timeLimit(.minutes(2)))
struct PushCompressionTests {
    static func capture(_ store: LocalStore, _ count: Int) async throws {
        try await store.write { tx in
            for index in 0..<count { _ = try tx.create(in: "people", ["name": .string("Person \(index)"), "section": .int(Int64(index))]) }
        }
    }

    @Test func pushesGoDeflatedOnceTheServerSaysItReadsDeflate() async throws {
        let harness = try SyncHarness()
        var options = SyncOptions()
        options.periodicInterval = nil
        options.liveUpdates = false
        options.pushBatchSize = 200
        let device = try harness.device("u-1", options: options)
        try await Self.capture(device.store, 1_000)
        let report = try await device.engine.sync()
        #expect(report.failure == nil && report.confirmed == 1_000)
        #expect(try harness.serverRecords().count == 1_000)

        let pushes = device.network.delivered(to: "/v1/push")
        #expect(pushes.count == 5)
        // The first push goes before any answer could say so; every one after it is deflated.
        let deflated = pushes.dropFirst()
        #expect(!deflated.isEmpty && deflated.allSatisfy { $0.headers["Content-Encoding"] == "deflate" }, "\(pushes.map(\.headers))")
        for push in deflated {
            let body = try #require(push.body)
            let plain = try BodyCompression.inflate(body, limit: 1 << 22)
            #expect(body.count * 3 < plain.count, "\(body.count) deflated of \(plain.count)")
            #expect(PushRequest.readWire([UInt8](plain))?.mutations.count == 200)
        }
    }

    /// Two servers behind one address, one of them older: its answers do
    /// not say it reads deflate, the newer one's do, and the older one
    /// reads a deflated body as broken JSON.
    final class MixedFleet: SyncTransport {
        let newer: any SyncTransport
        let refusals = Locked(0)
        init(_ newer: any SyncTransport) { self.newer = newer }

        func send(_ request: TransportRequest) async throws -> TransportResponse {
            if request.headers["Content-Encoding"] != nil {
                refusals.withLock { $0 += 1 }
                let body = #"{"error":{"code":"invalid_json","message":"The request body is not valid JSON."}}"#
                return TransportResponse(status: 400, headers: ["Content-Type": "application/json"], body: Data(body.utf8))
            }
            return try await newer.send(request)
        }
    }

    @Test func anEncodedPushTurnedDownWholeGoesAgainPlainAndNothingIsRefused() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        let fleet = MixedFleet(device.network)
        var options = SyncOptions()
        options.periodicInterval = nil
        options.liveUpdates = false
        options.pushBatchSize = 100
        let engine = SyncEngine(
            store: device.store, transport: fleet, token: try harness.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil),
            options: options)
        try await Self.capture(device.store, 400)
        let report = try await engine.sync()
        #expect(report.failure == nil && report.confirmed == 400 && report.rejected.isEmpty)
        #expect(try harness.serverRecords().count == 400)
        #expect(fleet.refusals.withLock { $0 } == 1, "one encoded push turned down, then plain ones only")
        let pushes = device.network.delivered(to: "/v1/push")
        #expect(pushes.count == 4 && pushes.allSatisfy { $0.headers["Content-Encoding"] == nil })
        #expect(try await device.store.outboxEntries().isEmpty)
        await engine.stop()
    }
}
