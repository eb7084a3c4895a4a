import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// The status's store figures, read in one call on the store.
@Suite("Status figures", .timeLimit(.minutes(1)))
struct StatusFiguresTests {
    @Test func everyFigureIsReadInOneCallAndTheStoreStaysWritable() async throws {
        let directory = try TemporaryDirectory()
        let store = try LocalStore(path: directory.path("device.sqlite"), collections: [Person.descriptor])
        _ = try await store.create(Person(name: "Ana"))
        try await store.setMetadata("scope.mode", ScopeMode.capped.rawValue)

        let figures = await store.statusFigures()
        #expect(figures.counts?["people"] == 1)
        #expect(figures.outbox?.pending == 1)
        #expect(figures.conflicts == 0)
        #expect(figures.mode == .capped)
        #expect(figures.pullState?.cursor == nil)

        // The reads' transaction ended with them: the next write commits
        // and the next read sees it.
        _ = try await store.create(Person(name: "Bruno"))
        let after = await store.statusFigures()
        #expect(after.counts?["people"] == 2)
        #expect(after.outbox?.pending == 2)
    }

    @Test func aClosedStoreGivesNoFigures() async throws {
        let directory = try TemporaryDirectory()
        let store = try LocalStore(path: directory.path("device.sqlite"), collections: [Person.descriptor])
        await store.close()
        let figures = await store.statusFigures()
        #expect(figures.counts == nil)
        #expect(figures.outbox == nil)
    }
}
