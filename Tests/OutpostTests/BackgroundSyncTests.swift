import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting
import Testing

/// `syncInBackground(until:)`: the most valuable work first, a clean stop
/// at the deadline, and a report of what is left. The deadline is driven
/// by the manual clock: it arrives exactly as a chosen request goes out.
@Suite("Syncing in the background", .timeLimit(.minutes(3)))
struct BackgroundSyncTests {
    /// A device whose engine sends through a `DeadlineCut` network.
    struct Device {
        let store: LocalStore
        let engine: SyncEngine
        let network: FaultInjectingTransport
        let cutter: DeadlineCut
        let wallClock: ManualWallClock
    }

    static func device(_ harness: SyncHarness, live: Bool = false) throws -> Device {
        let base = try harness.device("u-1")
        let cutter = DeadlineCut(base.network, clock: harness.clock)
        var options = SyncOptions()
        options.periodicInterval = nil
        options.reconnectJitter = .zero
        options.liveUpdates = live
        let engine = SyncEngine(
            store: base.store, transport: cutter, token: try harness.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil),
            options: options, clock: harness.clock, pathMonitor: ManualPathMonitor(), seed: 7)
        return Device(store: base.store, engine: engine, network: base.network, cutter: cutter, wallClock: base.deviceClock)
    }

    /// A person and a visit naming `photo`: the visit waits for the photo's upload.
    @discardableResult
    static func visit(_ device: Device, photo: OutpostCore.AttachedFile) async throws -> UUID {
        let person = try await device.store.create(Person(name: "Romero"))
        return try await device.store.create(PhotoVisit(person: person.wireText, visitedAt: "2026-11-29T10:00:00Z", photo: photo))
    }

    static func putBytes(_ network: FaultInjectingTransport) -> Int {
        network.delivered.filter { $0.method == "PUT" }.reduce(0) { $0 + ($1.body?.count ?? 0) }
    }

    @Test func aGenerousDeadlineDoesEverythingAndLeavesNothing() async throws {
        let harness = try SyncHarness()
        let device = try Self.device(harness)
        try await device.store.create(Person(name: "Ana"))
        let photo = try await device.store.attach(photoBytes(300_000, seed: 1), contentType: "image/jpeg")
        try await Self.visit(device, photo: photo)
        let report = try await device.engine.syncInBackground(until: device.wallClock.now() + 600)
        #expect(report.isComplete, "\(report)")
        #expect(report.changesPushed == 3 && report.attachmentsUploaded == 1 && report.attachmentBytesSent == 300_000, "\(report)")
        #expect(report.changesUnsent == 0 && report.changesInDoubt == 0 && report.attachmentsLeft == 0 && report.attachmentBytesLeft == 0)
        #expect(report.pullFinished && !report.deadlineReached && report.failure == nil)
        #expect(try harness.serverBlob(photo.sha256)?.complete == true)
        #expect(try harness.serverRecords("visits").count == 1)
        #expect(device.cutter.cut == nil)
    }

    @Test func aDeadlineAfterThePushesLeavesTheUploadsAndTheChangesWaitingForThem() async throws {
        let harness = try SyncHarness()
        let device = try Self.device(harness)
        try await device.store.create(Person(name: "Ana"))
        let large = try await device.store.attach(photoBytes(500_000, seed: 2), contentType: "image/jpeg")
        let small = try await device.store.attach(photoBytes(90_000, seed: 3), contentType: "image/jpeg")
        try await Self.visit(device, photo: large)
        try await Self.visit(device, photo: small)
        let deadline = harness.clock.now() + .seconds(20)
        device.cutter.cut(at: deadline, serverActs: false) { $0.method == "PUT" }
        let report = try await device.engine.syncInBackground(until: device.wallClock.now() + 20)

        #expect(device.cutter.cut?.target.contains(small.sha256) == true, "the smallest upload goes first")
        #expect(report.deadlineReached && !report.pullFinished && !report.isComplete, "\(report)")
        #expect(report.changesPushed == 3, "the three people went before any upload: \(report)")
        #expect(report.changesUnsent == 2 && report.changesInDoubt == 0, "the visits wait for their photos: \(report)")
        #expect(report.attachmentsUploaded == 0 && report.attachmentsLeft == 2 && report.attachmentBytesLeft == 590_000, "\(report)")
        #expect(try harness.serverRecords("visits").isEmpty)
        #expect(device.network.delivered(to: "/v1/pull").isEmpty, "the pull comes last and never started")
        #expect(await device.engine.activity.cycleRunning == false, "nothing starts after the cut")
        #expect(harness.clock.pendingDeadlines.isEmpty, "no retry timer either: \(harness.clock.pendingDeadlines)")

        let next = try await device.engine.sync()
        #expect(next.attachmentsUploaded == 2 && next.failure == nil, "\(next)")
        #expect(try harness.serverRecords("visits").count == 2)
        #expect(Self.putBytes(device.network) == 590_000, "every byte sent once")
    }

    @Test func aDeadlineMidUploadResumesFromWhatTheServerHoldsWithNothingSentTwice() async throws {
        let harness = try SyncHarness()
        let device = try Self.device(harness)
        // Pieces of 4 MB, then 8 MB on this fast link, then the last 2 MB.
        let size = 14 << 20
        let photo = try await device.store.attach(photoBytes(size, seed: 4), contentType: "image/jpeg")
        try await Self.visit(device, photo: photo)
        let puts = Locked(0)
        let deadline = harness.clock.now() + .seconds(20)
        device.cutter.cut(at: deadline, serverActs: true) { request in
            request.method == "PUT" && puts.withLock { count in
                count += 1
                return count == 2
            }
        }
        let report = try await device.engine.syncInBackground(until: device.wallClock.now() + 20)
        #expect(report.deadlineReached && report.attachmentsLeft == 1 && report.attachmentsUploaded == 0, "\(report)")
        #expect(report.attachmentBytesLeft == Int64(size - (4 << 20)), "the device knows of the first piece only: \(report)")
        #expect(report.changesPushed == 1 && report.changesUnsent == 1, "\(report)")
        #expect(try harness.serverBlob(photo.sha256)?.received == Int64(12 << 20), "the server kept the piece whose answer was lost")

        let next = try await device.engine.sync()
        #expect(next.attachmentsUploaded == 1 && next.failure == nil, "\(next)")
        #expect(try harness.serverBlob(photo.sha256)?.complete == true)
        #expect(Self.putBytes(device.network) == size, "the upload went on from the server's 12 MB: nothing doubled")
        #expect(try await device.store.outboxSummary().total == 0)
    }

    @Test func aDeadlineMidPushLeavesTheChangesInDoubtAndTheNextSyncSettlesThemOnce() async throws {
        let harness = try SyncHarness()
        let device = try Self.device(harness)
        for name in ["Ana", "Bo", "Cy"] { try await device.store.create(Person(name: name)) }
        let deadline = harness.clock.now() + .seconds(20)
        device.cutter.cut(at: deadline, serverActs: true) { $0.target.hasPrefix("/v1/push") }
        let report = try await device.engine.syncInBackground(until: device.wallClock.now() + 20)
        #expect(report.deadlineReached && report.changesPushed == 0, "\(report)")
        #expect(report.changesUnsent == 3 && report.changesInDoubt == 3, "sent, answer lost: checking result: \(report)")
        #expect(try harness.serverRecords().count == 3, "the server applied them")
        #expect(await device.engine.currentStatus.awaitingConfirmation == 3)

        let next = try await device.engine.sync()
        #expect(next.confirmed == 3 && next.duplicates == 3, "settled by the resend, as already applied: \(next)")
        #expect(try harness.serverRecords().count == 3, "each change applied once")
        #expect(try await device.store.outboxSummary().total == 0)
        let pushes = device.network.delivered(to: "/v1/push").count
        try await device.engine.sync()
        #expect(device.network.delivered(to: "/v1/push").count == pushes, "nothing left to settle")
    }

    @Test func cancellingTheCallerCutsAtOnceAsTheDeadlineWould() async throws {
        let harness = try SyncHarness()
        let device = try Self.device(harness)
        try await device.store.create(Person(name: "Ana"))
        // A background task's expiration handler cancels the work before the deadline.
        device.cutter.cut(at: nil, serverActs: true) { $0.target.hasPrefix("/v1/push") }
        let work = Task { try await device.engine.syncInBackground(until: device.wallClock.now() + 600) }
        try await eventually("the push is on the wire") { device.cutter.cut != nil }
        work.cancel()
        let report = try await work.value
        #expect(report.deadlineReached && report.changesInDoubt == 1 && report.changesPushed == 0, "\(report)")
        #expect(await device.engine.activity.cycleRunning == false)
        let next = try await device.engine.sync()
        #expect(next.duplicates == 1 && next.confirmed == 1, "\(next)")
        #expect(try harness.serverRecords().count == 1)
    }

    @Test func aDeadlineAlreadyPassedIsRefusedAndChangesNothing() async throws {
        let harness = try SyncHarness()
        let device = try Self.device(harness)
        try await device.store.create(Person(name: "Ana"))
        await #expect(throws: BackgroundSyncError.deadlinePassed(by: .zero)) {
            try await device.engine.syncInBackground(until: device.wallClock.now())
        }
        await #expect(throws: BackgroundSyncError.deadlinePassed(by: .seconds(5))) {
            try await device.engine.syncInBackground(until: device.wallClock.now() - 5)
        }
        await #expect(throws: BackgroundSyncError.self) {
            try await device.engine.syncInBackground(until: ContinuousClock.now - .seconds(1))
        }
        #expect(device.network.delivered.isEmpty, "nothing sent")
        #expect(try await device.store.outboxSummary().pending == 1)
        #expect(await device.engine.lastCycleReport == nil, "no cycle ran")
        #expect("\(BackgroundSyncError.deadlinePassed(by: .seconds(5)))".contains("nothing was done"))
    }

    @Test func aCycleAlreadyRunningIsJoinedNotRaced() async throws {
        let harness = try SyncHarness()
        let device = try Self.device(harness)
        try await device.store.create(Person(name: "Ana"))
        let gate = FaultInjectingTransport.Gate()
        device.network.inject(.hold(gate)) { $0.target.hasPrefix("/v1/pull") }
        let foreground = Task { try await device.engine.sync() }
        try await gate.waitForArrivals(1)
        // Written while the foreground cycle is past its push.
        try await device.store.create(Person(name: "Bo"))
        let started = harness.clock.now()
        let background = Task { try await device.engine.syncInBackground(until: device.wallClock.now() + 120) }
        try await harness.clock.waitForSleeper(until: started + .seconds(120))
        #expect(device.network.delivered(to: "/v1/push").count == 1, "nothing of the background sync went while the cycle ran")
        gate.open()
        let report = try await background.value
        _ = try await foreground.value
        #expect(report.isComplete && report.changesPushed == 1, "it followed the running cycle and sent Bo: \(report)")
        let order = device.network.delivered.map(\.target)
        let firstPull = try #require(order.firstIndex { $0.hasPrefix("/v1/pull") })
        let lastPush = try #require(order.lastIndex { $0.hasPrefix("/v1/push") })
        #expect(lastPush > firstPull, "Bo went after the running cycle's pull: \(order)")
        #expect(try harness.serverRecords().count == 2)
    }

    @Test func itRunsWithTheLiveChannelOpen() async throws {
        let harness = try SyncHarness()
        let device = try Self.device(harness, live: true)
        await device.engine.start()
        try await device.engine.sync()
        // A started engine sends a change by itself too: the report counts what this call confirmed.
        try await device.store.create(Person(name: "Ana"))
        let report = try await device.engine.syncInBackground(until: device.wallClock.now() + 60)
        #expect(report.isComplete && report.changesPushed <= 1, "\(report)")
        await device.engine.enteredBackground()
        try await device.store.create(Person(name: "Bo"))
        let closed = try await device.engine.syncInBackground(until: device.wallClock.now() + 60)
        #expect(closed.isComplete && closed.changesPushed <= 1, "and with it closed: \(closed)")
        await device.engine.stop()
        #expect(try harness.serverRecords().count == 2)
    }

    @Test func aRunningCycleStillOutAtTheDeadlineIsCutAndNothingFollowsIt() async throws {
        let harness = try SyncHarness()
        let device = try Self.device(harness)
        try await device.store.create(Person(name: "Ana"))
        // The foreground cycle's pull hangs until cancelled; the test moves the clock.
        device.cutter.cut(at: nil, serverActs: false) { $0.target.hasPrefix("/v1/pull") }
        let foreground = Task { try await device.engine.sync(timeout: .seconds(600)) }
        try await eventually("the foreground cycle's pull is on the wire") { device.cutter.cut != nil }
        try await device.store.create(Person(name: "Bo"))
        let background = Task { try await device.engine.syncInBackground(until: device.wallClock.now() + 30) }
        try await harness.clock.advanceOnceAsleep(for: .seconds(30))
        let report = try await background.value
        #expect(report.deadlineReached && !report.pullFinished, "\(report)")
        #expect(report.changesPushed == 0 && report.changesUnsent == 1, "Bo waits: the cut dropped the sync that was to follow: \(report)")
        await #expect(throws: SyncFailure.self) { try await foreground.value }
        #expect(await device.engine.activity.cycleRunning == false, "nothing started after the cut")
        #expect(device.network.delivered(to: "/v1/push").count == 1, "Ana's push only")
        let next = try await device.engine.sync()
        #expect(next.confirmed == 1 && next.failure == nil, "the next trigger sends Bo: \(next)")
    }
}

/// The schedule's cut, as a value: a cycle cut at a background deadline
/// starts nothing after it, whatever it asked for.
@Suite("Sync schedule: the background cut")
struct ScheduleCutTests {
    @Test func aCutCycleStartsNoFollowUpNeitherOneAskedBeforeNorOneAskedAsItEnds() throws {
        var schedule = SyncSchedule()
        guard case .start(let cycle) = schedule.request(.launch, now: .zero) else {
            Issue.record("the first trigger starts a cycle")
            return
        }
        #expect(schedule.request(.manual, now: .zero) == .coalesced)
        #expect(schedule.cut() == cycle)
        #expect(schedule.running == nil && schedule.followUp == nil && !schedule.isCurrent(cycle.generation))
        // Uploads cut mid-way ask for a follow-up as the cycle ends.
        schedule.requestFollowUp(.retry)
        #expect(schedule.finished(cycle) == nil, "nothing follows a cut cycle")
        #expect(schedule.followUp == nil)
        #expect(schedule.completedCycles == 1)
        #expect(schedule.cut() == nil, "nothing runs to cut")
    }

    @Test func aCycleStartedAfterTheCutKeepsItsFollowUp() throws {
        var schedule = SyncSchedule()
        guard case .start(let cut) = schedule.request(.launch, now: .zero) else {
            Issue.record("the first trigger starts a cycle")
            return
        }
        _ = schedule.cut()
        guard case .start(let next) = schedule.request(.foreground, now: .zero) else {
            Issue.record("a trigger after the cut starts a cycle at once")
            return
        }
        #expect(schedule.request(.localChange, now: .zero) == .coalesced)
        #expect(schedule.finished(cut) == nil)
        #expect(schedule.running == next && schedule.followUp == .localChange, "the newer cycle's follow-up stays")
        #expect(schedule.finished(next) == .localChange)
    }
}
