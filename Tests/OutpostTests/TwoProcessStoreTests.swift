import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// An app and its extension on one store file, as two real processes: the
/// extension's captures join the app's outbox and are pushed once, by the
/// app's engine; the app's observations show them; opening beside the
/// other process changes nothing of its work.
@Suite("Two processes on one store", .timeLimit(.minutes(5)))
struct TwoProcessStoreTests {
    /// The second process, built next to the test bundle.
    static var extensionURL: URL { ChildProcess.product("OutpostExtensionWriter") }

    /// Runs the extension to its end; its lines, or a failure naming its stderr.
    static func runExtension(_ path: String, captures: Int, prefix: String) async throws -> [Substring] {
        let output = try await Task.detached {
            try ChildProcess.run(extensionURL, [path, String(captures), prefix], timeout: .seconds(120))
        }.value(within: .seconds(150), "the extension process writing \(captures) captures")
        #expect(output.status == 0, "the extension exited with \(output.status): \(output.stderr)")
        return output.stdout.split(separator: "\n")
    }

    static func captured(_ lines: [Substring]) -> [String] {
        lines.filter { $0.hasPrefix("C ") }.map { String($0.dropFirst(2)) }
    }

    @Test func extensionCapturesShowInTheAppAndArePushedOnceByItsEngine() async throws {
        let harness = try SyncHarness()
        let app = try harness.device("ana")
        let path = harness.directory.path("ana.sqlite")
        let shown = Locked(0)
        let observing = Task {
            for try await people in await app.store.observe(Person.self) { shown.withLock { $0 = people.count } }
        }
        defer { observing.cancel() }

        // Both processes write at once: each waits for the other's lock.
        async let extensionLines = Self.runExtension(path, captures: 25, prefix: "share")
        for index in 0..<25 { try await app.store.create(Person(name: "app-\(index)")) }
        let fromExtension = Self.captured(try await extensionLines)
        #expect(fromExtension.count == 25)

        try await eventually("the app's observation to show the extension's 25 captures beside its own 25", timeout: .seconds(20)) {
            shown.withLock { $0 } == 50
        }
        _ = try await app.engine.sync()
        let onServer = try harness.serverRecords().map(\.uuid)
        #expect(onServer.count == 50)
        #expect(Set(onServer).isSuperset(of: fromExtension), "every capture of the extension reached the server")
        // One seq for each change: none was taken twice.
        #expect(try await app.store.lastSeq() == 50)
        #expect(try await app.store.outboxEntries().isEmpty)
        await app.store.close()
    }

    @Test func openingBesideAPushInFlightLeavesItsRecordsSending() async throws {
        let fixture = try StoreFixture()
        let app = fixture.store
        for index in 0..<3 { try await app.create(Person(name: "app-\(index)")) }
        let batch = try #require(try await app.takePushBatch())

        // The extension opens (and would reset records left "sending" by a
        // process that died) while the app's push is on the wire.
        let fromExtension = Self.captured(try await Self.runExtension(fixture.path, captures: 2, prefix: "share"))
        #expect(fromExtension.count == 2)
        let states = try await app.query(Person.self).filter { $0.value.name.hasPrefix("app-") }.map(\.syncState)
        #expect(states == [.sending, .sending, .sending], "the app's push is still in flight: \(states)")

        // A second store on the file (another process's) takes no push while this one is on the wire.
        let other = try LocalStore(
            path: fixture.path, collections: StoreFixture.collections, busyTimeout: .milliseconds(100))
        #expect(try await other.takePushBatch() == nil)

        let server = ScriptedServer()
        _ = try await app.settle(batch, with: server.answer(batch))
        #expect(try await app.query(Person.self).filter { $0.value.name.hasPrefix("app-") }.allSatisfy { $0.syncState == .synced })
        // Then the extension's captures go in the next push, once.
        let next = try #require(try await other.takePushBatch())
        #expect(Set(next.request.mutations.map(\.uuid.wireText)) == Set(fromExtension))
        _ = try await other.settle(next, with: server.answer(next))
        #expect(try await app.takePushBatch() == nil)
        await other.close()
        await app.close()
    }

    @Test func theWatchForOtherProcessesLooksOnlyWhileObservedAndCostsLittle() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        // Nobody observes: the store does not look at all.
        try await Task.sleep(for: .seconds(1))
        #expect(await store.otherProcessLooks == 0)
        // Observed: it looks, about five times a second and never much more.
        let observing = Task { for try await _ in await store.observe(Person.self) {} }
        try await eventually("the observed store to look for other processes' commits three times", timeout: .seconds(30)) {
            await store.otherProcessLooks >= 3
        }
        let windowStart = ContinuousClock.now
        let looksBefore = await store.otherProcessLooks
        try await Task.sleep(for: .seconds(1))
        let window = (ContinuousClock.now - windowStart) / .seconds(1)
        let rate = Double(await store.otherProcessLooks - looksBefore) / window
        #expect(rate <= 10, "looks a second while observed: \(rate)")
        // The observer gone, the looks stop.
        observing.cancel()
        try await eventually("the watch to stop once nobody observes", timeout: .seconds(10)) {
            let before = await store.otherProcessLooks
            try await Task.sleep(for: .milliseconds(500))
            return await store.otherProcessLooks == before
        }
        // One look, timed: a read of `data_version` on the store's queue.
        let looks = 1_000
        let start = ContinuousClock.now
        for _ in 0..<looks { await store.checkOtherProcesses() }
        let perLook = (ContinuousClock.now - start) / looks
        #expect(perLook < .milliseconds(20), "one look for other processes' commits took \(perLook)")
        await store.close()
    }

    @Test func destroyRemovesThePushLockFileWithTheDatabase() async throws {
        let fixture = try StoreFixture()
        try await fixture.store.create(Person(name: "a"))
        _ = try #require(try await fixture.store.takePushBatch())
        #expect(FileManager.default.fileExists(atPath: fixture.path + ".outpost-push"))
        try await fixture.store.destroy()
        #expect(!FileManager.default.fileExists(atPath: fixture.path + ".outpost-push"))
        #expect(!FileManager.default.fileExists(atPath: fixture.path))
    }

    @Test func processesCreatingOneStoreAtOnceAgreeOnIt() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("shared.sqlite")
        async let first = Self.runExtension(path, captures: 10, prefix: "a")
        async let second = Self.runExtension(path, captures: 10, prefix: "b")
        async let third = Self.runExtension(path, captures: 10, prefix: "c")
        let runs = try await [first, second, third]
        let clientIDs = Set(runs.flatMap { $0.filter { $0.hasPrefix("R ") } })
        #expect(clientIDs.count == 1, "every process found the same client id: \(clientIDs)")
        let store = try LocalStore(path: path, collections: StoreFixture.collections)
        #expect(try await store.query(Person.self).count == 30)
        #expect(try await store.outboxEntries().count == 30)
        #expect(store.clientID.wireText == clientIDs.first.map { String($0.dropFirst(2)) })
        await store.close()
    }
}
