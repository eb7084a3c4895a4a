import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// An observed store looks for other processes' commits less often while
/// none comes (a thousand idle stores in one process looked five thousand
/// times a second), and soon again after one: another process's commit
/// still shows within 2 s.
@Suite("Looks for other processes' commits", .timeLimit(.minutes(3)))
struct OtherProcessLooksTests {
    @Test func quietLooksSlowDownAndAnotherProcesssCommitStillShowsWithinTwoSeconds() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let shown = Locked(0)
        let observing = Task {
            for try await people in await store.observe(Person.self) { shown.withLock { $0 = people.count } }
        }
        defer { observing.cancel() }
        #expect(await store.otherProcessLookWait == .milliseconds(200), "the watch starts looking often")
        try await eventually("the quiet store's looks to slow to 1.5 s", timeout: .seconds(30)) {
            await store.otherProcessLookWait == .milliseconds(1_500)
        }
        // Slowed down: about one look in 1.5 s, where it took five a second.
        let looksBefore = await store.otherProcessLooks
        try await Task.sleep(for: .seconds(2))
        let looks = await store.otherProcessLooks - looksBefore
        #expect(looks <= 3, "looks in 2 s once quiet: \(looks)")

        // Another connection to the file (as another process's) commits.
        let other = try LocalStore(path: fixture.path, collections: StoreFixture.collections)
        try await other.create(Person(name: "from the extension"))
        let committed = ContinuousClock.now
        try await eventually("the other process's commit to show in the observation", timeout: .seconds(10)) {
            shown.withLock { $0 } == 1
        }
        let delay = ContinuousClock.now - committed
        #expect(delay < .seconds(2), "another process's commit showed after \(delay)")
        #expect(await store.otherProcessLookWait == .milliseconds(200), "after a change the store looks often again")
        await other.close()
        await store.close()
    }

    @Test func theSlowestLookCanBeSetAndNeverGoesBelowTheFirst() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        await store.watchOtherProcesses(every: .milliseconds(50), slowest: .milliseconds(100))
        let observing = Task { for try await _ in await store.observe(Person.self) {} }
        defer { observing.cancel() }
        try await eventually("the looks to slow to the 100 ms set", timeout: .seconds(10)) {
            await store.otherProcessLookWait == .milliseconds(100)
        }
        await store.watchOtherProcesses(every: .milliseconds(300), slowest: .milliseconds(100))
        #expect(await store.otherProcessLookWait == .milliseconds(300))
        for _ in 0..<3 { await store.checkOtherProcesses() }
        #expect(await store.otherProcessLookWait == .milliseconds(300), "a slowest below the first wait is the first")
        await store.close()
    }
}
