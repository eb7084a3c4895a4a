import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// An app shows "Syncing…" from `SyncStatus.isSyncing`: every cycle must
/// turn it on where a listener sees it and off again at its end, also when
/// nothing else in the status moves (a sync with nothing to send or
/// receive, or one that fails as the cycle before it did).
@Suite("The syncing flag as a listener sees it", .timeLimit(.minutes(2)))
struct SyncingStatusTests {
    @Test func aCycleThatChangesNothingStillShowsItself() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        try await device.store.create(Person(name: "Ana"))
        try await device.engine.sync()
        let seen = FlagLog()
        let updates = await device.engine.statusUpdates(keeping: 1_000)
        let watcher = Task { for await status in updates { seen.add(status.isSyncing) } }
        defer { watcher.cancel() }
        try await eventually("the status now was delivered", timeout: .seconds(5)) { seen.all == [false] }
        try await device.engine.sync()
        try await eventually("the cycle was shown, then its end", timeout: .seconds(5)) {
            seen.all.contains(true) && seen.all.last == false
        }
        #expect(seen.steps == [false, true, false], "\(seen.all)")
    }

    @Test func aCycleFailingAsTheOneBeforeEndsNotSyncing() async throws {
        let harness = try SyncHarness()
        var options = SyncOptions()
        options.periodicInterval = nil
        let device = try harness.device("u-1", options: options)
        device.network.isOffline = true
        await #expect(throws: SyncFailure.self) { try await device.engine.sync() }
        let seen = FlagLog()
        let updates = await device.engine.statusUpdates(keeping: 1_000)
        let watcher = Task { for await status in updates { seen.add(status.isSyncing) } }
        defer { watcher.cancel() }
        try await eventually("the status now was delivered", timeout: .seconds(5)) { seen.all == [false] }
        try await device.store.create(Person(name: "Ana"))
        await #expect(throws: SyncFailure.self) { try await device.engine.sync() }
        try await eventually("the cycle was shown, then its end", timeout: .seconds(5)) {
            seen.all.contains(true) && seen.all.last == false
        }
        #expect(seen.steps == [false, true, false], "\(seen.all)")
        #expect(await device.engine.currentStatus.isSyncing == false)
    }
}

/// Syncing flags seen in a status stream.
final class FlagLog: @unchecked Sendable {
    // @unchecked Sendable: `flags` is only touched while `lock` is held.
    private let lock = NSLock()
    private var flags: [Bool] = []
    func add(_ flag: Bool) { lock.withLock { flags.append(flag) } }
    var all: [Bool] { lock.withLock { flags } }
    /// The flags with repeats in a row left out: each time it turned.
    var steps: [Bool] { all.reduce(into: []) { if $0.last != $1 { $0.append($1) } } }
}
