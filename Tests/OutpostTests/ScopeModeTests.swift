import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting
import Testing

/// What each role keeps offline, and that the UI can say what is not downloaded.
@Suite("Scope modes", .timeLimit(.minutes(5)))
struct ScopeModeTests {
    @Test func anAdministratorSearchesOnlineAndCachesWhatSheOpens() async throws {
        let harness = try SyncHarness()
        let field = try harness.device("f-1", name: "field")
        let ana = try await field.store.create(Person(name: "Ana Torres"))
        try await field.store.create(Person(name: "Bruno Silva"))
        try await field.engine.sync()

        let admin = try harness.device("a-1", role: .admin, team: "hq", name: "admin")
        let report = try await admin.engine.sync()
        #expect(report.received == 18, "only the catalogs are downloaded")
        #expect(try await admin.store.query(Person.self).isEmpty)
        let status = await admin.engine.currentStatus
        #expect(status.coverage["people"]?.mode == .onlineWithCache)
        #expect(status.coverage["people"]?.inScope == 2, "the UI can say 2 exist, 0 are here")

        let found = try await admin.engine.searchRemote("people", "ana")
        #expect(found.map(\.uuid) == [ana])
        #expect(try await admin.store.get(Person.self, ana)?.value.name == "Ana Torres", "cached for offline use")
        // Capture works offline in every mode.
        admin.network.isOffline = true
        let captured = try await admin.store.create(Person(name: "Captured by admin"))
        admin.network.isOffline = false
        try await admin.engine.sync()
        #expect(try harness.serverRecords().contains { $0.uuid == captured.wireText })
    }

    @Test func aCoordinatorAboveTheCapKeepsOnlyTheWindow() async throws {
        let harness = try SyncHarness()
        let field = try harness.device("f-1", team: "t-1", name: "field")
        let now = harness.serverClock.now()
        var recent: Set<UUID> = []
        for index in 0..<4 {
            recent.insert(
                try await field.store.create(in: "people", ["name": .string("New \(index)"), "created_at": .string(ServerTimestamp(now - 86_400).rawValue)]))
            try await field.store.create(in: "people", ["name": .string("Old \(index)"), "created_at": .string(ServerTimestamp(now - 800 * 86_400).rawValue)])
        }
        try await field.engine.sync()

        var options = SyncOptions()
        options.periodicInterval = nil
        options.reconnectJitter = .zero
        options.capRows = 5
        let coordinator = try harness.device("c-1", role: .coordinator, team: "t-1", name: "coordinator", options: options)
        try await coordinator.engine.sync()
        let local = Set(try await coordinator.store.query(Person.self).map(\.uuid))
        #expect(local == recent, "above the cap only the last 12 months are downloaded")
        let coverage = try #require(await coordinator.engine.currentStatus.coverage["people"])
        #expect(coverage.mode == .capped)
        #expect(coverage.windowStart != nil, "the UI can say what is not downloaded")
        #expect(coverage.isComplete == false)
        // Older records are found online.
        let old = try await coordinator.engine.searchRemote("people", "Old 2")
        #expect(old.count == 1)
    }
}
