import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostSimulation
import OutpostTesting
import Testing

/// A transport over a real socket whose streams a test can spoil the way
/// networks do: held back by a buffering proxy, gone silent with the
/// socket open, or carrying an event after the channel was replaced.
final class SpoilingTransport: SyncTransport, Sendable {
    enum Mode: Sendable {
        case passThrough, buffering, silentAfterFirstChunk
        /// Each new stream also carries, after its first bytes, the first
        /// page of changes the previous stream carried: an old event
        /// delivered late.
        case replayPreviousStream
    }

    private let wrapped: URLSessionTransport
    private let mode = Locked(Mode.passThrough)
    private let opened = Locked<[AsyncThrowingStream<Data, any Error>.Continuation]>([])
    /// Every chunk each stream carried, by stream.
    private let carried = Locked<[[Data]]>([])
    /// Long polls held back (an answer still on its way), and what they will answer.
    private let held = Locked<(holding: Bool, waiting: [CheckedContinuation<Data, Never>])>((false, []))

    /// Until then, every request and stream waits before it is sent, the
    /// way a server in a reconnect storm answers: late, but it answers.
    private let stalledUntil = Locked<ContinuousClock.Instant?>(nil)

    init(baseURL: URL) { wrapped = URLSessionTransport(baseURL: baseURL) }

    /// For `duration` from now, nothing is answered sooner than the end of
    /// it; a request whose timeout comes first fails as unanswered.
    func stall(for duration: Duration) { stalledUntil.withLock { $0 = .now + duration } }

    /// Waits out the stall, or fails at the request's timeout when the stall lasts longer.
    private func waitOutStall(_ request: TransportRequest) async throws {
        guard let until = stalledUntil.current, until > .now else { return }
        let timeout = Duration.milliseconds(Int64(request.timeout * 1000))
        if .now + timeout < until {
            try await Task.sleep(for: timeout)
            throw TransportError.noAnswer("no answer within \(request.timeout) seconds")
        }
        try await Task.sleep(until: until)
    }

    /// Ends every stream open now, as a server does at a stream's maximum duration.
    func endStreams() {
        for stream in opened.current { stream.finish() }
    }

    func set(_ mode: Mode) { self.mode.withLock { $0 = mode } }
    var streamsOpened: Int { opened.current.count }

    /// From now on, long polls get no answer until `releaseHeld`; a
    /// cancelled caller does not stop it (the answer was already on its way).
    func holdPolls() { held.withLock { $0.holding = true } }
    var heldPolls: Int { held.current.waiting.count }

    /// The oldest held long poll answers now, with `body`.
    func releaseOldest(answering body: Data) {
        let oldest = held.withLock { state in state.waiting.isEmpty ? nil : state.waiting.removeFirst() }
        oldest?.resume(returning: body)
    }

    /// Every held long poll answers now, with `body`, and polls pass again.
    func releaseAll(answering body: Data) {
        let waiting = held.withLock { state -> [CheckedContinuation<Data, Never>] in
            state.holding = false
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume(returning: body) }
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        if request.target.contains("wait="), held.current.holding {
            let body = await withCheckedContinuation { continuation in held.withLock { $0.waiting.append(continuation) } }
            return TransportResponse(status: 200, headers: ["Content-Type": "application/json"], body: body)
        }
        try await waitOutStall(request)
        return try await wrapped.send(request)
    }

    /// Streams asked for plain (`Accept-Encoding: identity`): a proxy that
    /// reads their events (the chaos proxy's replay) cannot read compressed ones.
    let plainStreams = Locked(false)

    func openStream(_ request: TransportRequest) async throws -> TransportStream {
        try await waitOutStall(request)
        var request = request
        if plainStreams.current { request.headers["Accept-Encoding"] = "identity" }
        let real = try await wrapped.openStream(request)
        let mode = self.mode.current
        let (bytes, continuation) = AsyncThrowingStream.makeStream(of: Data.self, throwing: (any Error).self)
        opened.withLock { $0.append(continuation) }
        let index = carried.withLock { carried in
            carried.append([])
            return carried.count - 1
        }
        let previous = (index > 0 ? carried.current[index - 1] : []).filter {
            String(decoding: $0, as: UTF8.self).contains("event: changes")
        }.prefix(1)
        let carried = self.carried
        let pump = Task {
            var chunks = 0
            do {
                for try await chunk in real.bytes {
                    chunks += 1
                    carried.withLock { $0[index].append(chunk) }
                    switch mode {
                    case .passThrough: continuation.yield(chunk)
                    case .buffering: break
                    case .silentAfterFirstChunk: if chunks == 1 { continuation.yield(chunk) }
                    case .replayPreviousStream:
                        continuation.yield(chunk)
                        if chunks == 1 { for old in previous { continuation.yield(old) } }
                    }
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in pump.cancel() }
        return TransportStream(status: real.status, headers: real.headers, bytes: bytes)
    }
}

/// A live server and devices on it through real sockets.
final class LiveSyncRig: @unchecked Sendable {
    // @unchecked Sendable: set up once in init.
    let directory: TemporaryDirectory
    let server: SyncServer
    let http: HTTPServer
    let base: URL

    init(heartbeatSeconds: Int = 15) async throws {
        directory = try TemporaryDirectory(prefix: "outpost-live")
        var config = try ServerConfig()
        config.heartbeatSeconds = heartbeatSeconds
        server = try SyncServer(database: try SQLiteServerDatabase(path: directory.path("server.sqlite")), config: config)
        http = try HTTPServer(port: 0, threads: 4, server: server)
        base = URL(string: "http://127.0.0.1:\(http.port)")!
        try await waitUntilServing(base)
    }

    deinit { http.stop() }

    /// A chaos proxy in front of this server, answering.
    func chaosProxy(_ mode: ChaosMode = .pass) async throws -> ChaosProxy {
        let proxy = try ChaosProxy(upstreamPort: http.port, mode: mode)
        try await waitUntilServing(proxy.url)
        return proxy
    }

    /// The cursor at the end of the feed, as the server gives it to `user`.
    func feedEnd(user: String, role: Role, collections: [String]) throws -> String? {
        let token = try server.tokens.issue(user: user, role: role, team: "t-1", ttl: nil)
        var cursor: String?
        while true {
            var target = "/v1/pull?collections=\(collections.joined(separator: ","))&limit=1000"
            if let cursor { target += "&cursor=\(cursor)" }
            let answer = server.handle(HTTPRequest(method: "GET", target: target, headers: ["Authorization": "Bearer \(token)"]))
            let page = try WireCoding.decode(PullResponse.self, from: Data(answer.body))
            cursor = page.cursor.rawValue
            if !page.hasMore { return cursor }
        }
    }

    func device(
        _ user: String, name: String, role: Role = .field, options: SyncOptions = SyncOptions(), via proxy: URL? = nil
    ) throws -> (store: LocalStore, engine: SyncEngine, transport: SpoilingTransport) {
        let store = try LocalStore(path: directory.path("\(name).sqlite"), collections: [Person.descriptor, Visit.descriptor])
        let transport = SpoilingTransport(baseURL: proxy ?? base)
        var options = options
        options.reconnectJitter = .milliseconds(50)
        let engine = SyncEngine(
            store: store, transport: transport, token: try server.tokens.issue(user: user, role: role, team: "t-1", ttl: nil),
            options: options)
        return (store, engine, transport)
    }
}

extension SyncOptions {
    /// Heartbeats every second and quick retries: through the chaos proxy, a
    /// dead or replaced channel shows within seconds.
    static var quickLive: SyncOptions {
        var options = SyncOptions()
        options.liveHeartbeat = .seconds(1)
        options.retry = RetryPolicy(base: .milliseconds(100), cap: .milliseconds(300))
        return options
    }
}

@Suite("Live sync", .timeLimit(.minutes(3)))
struct LiveSyncTests {
    /// The first wait for a channel: at a full run's start a first request
    /// can wait most of a minute for a thread (see `waitUntilServing`).
    static let firstLive: Duration = .seconds(100)

    @Test func aChangeReachesAnotherDeviceAsItCommitsWithNoSyncByHand() async throws {
        let rig = try await LiveSyncRig()
        let coordinator = try rig.device("c-1", name: "coordinator", role: .coordinator)
        let worker = try rig.device("u-1", name: "worker")
        await coordinator.engine.start()
        try await eventually("the coordinator's channel is live", timeout: Self.firstLive) { await coordinator.engine.currentStatus.live == .live }
        let statuses = await coordinator.engine.statusUpdates()
        let id = try await worker.store.create(Person(name: "Captured at the door"))
        try await worker.engine.sync()
        let pushed = ContinuousClock.now
        try await eventually("the capture is on the coordinator's device") {
            try await coordinator.store.get(Person.self, id) != nil
        }
        #expect(ContinuousClock.now - pushed < .seconds(5), "live, not at the next periodic sync")
        let status = await coordinator.engine.currentStatus
        #expect(status.live == .live && status.lastLiveEventAt != nil)
        _ = statuses
        await coordinator.engine.stop()
        #expect(await coordinator.engine.currentStatus.live == .off)
        #expect(await coordinator.engine.runningTasks == 0)
    }

    @Test func aBufferingProxyMeansLongPollsAndChangesStillArrive() async throws {
        let rig = try await LiveSyncRig()
        var options = SyncOptions()
        options.liveFirstEventLimit = .milliseconds(600)
        options.longPollWait = 5
        let coordinator = try rig.device("c-1", name: "coordinator", role: .coordinator, options: options)
        coordinator.transport.set(.buffering)
        let worker = try rig.device("u-1", name: "worker")
        await coordinator.engine.start()
        try await eventually("the engine fell back to long polls", timeout: Self.firstLive) { await coordinator.engine.currentStatus.live == .polling }
        let streamsBefore = coordinator.transport.streamsOpened
        let id = try await worker.store.create(Person(name: "Through the proxy"))
        try await worker.engine.sync()
        try await eventually("the change arrived by long poll") { try await coordinator.store.get(Person.self, id) != nil }
        #expect(coordinator.transport.streamsOpened == streamsBefore, "streams are not tried again on that server")
        await coordinator.engine.stop()
    }

    @Test func aServerTooBusyToAnswerAStreamInTimeIsNotTakenForABufferingProxy() async throws {
        let rig = try await LiveSyncRig()
        var options = SyncOptions.quickLive
        options.liveFirstEventLimit = .milliseconds(600)
        let coordinator = try rig.device("c-1", name: "coordinator", role: .coordinator, options: options)
        let worker = try rig.device("u-1", name: "worker")
        let statuses = await coordinator.engine.statusUpdates()
        let seen = Locked<Set<String>>([])
        let watcher = Task { for await status in statuses { seen.withLock { _ = $0.insert("\(status.live)") } } }
        defer { watcher.cancel() }
        await coordinator.engine.start()
        try await eventually("the stream went live", timeout: Self.firstLive) { await coordinator.engine.currentStatus.live == .live }
        let streamsBefore = coordinator.transport.streamsOpened
        seen.withLock { $0.removeAll() }

        // The server answers nothing for 3 s (streams' headers and plain
        // pulls alike), and the open stream ends: the reconnection meets it.
        coordinator.transport.stall(for: .seconds(3))
        coordinator.transport.endStreams()
        try await eventually("the reconnection met the stall") { !seen.current.isDisjoint(with: ["connecting", "polling"]) }
        try await eventually("a stream again after the stall", timeout: .seconds(30)) {
            await coordinator.engine.currentStatus.live == .live && coordinator.transport.streamsOpened > streamsBefore
        }
        #expect(!seen.current.contains("polling"), "a slow server is retried with streams, not given long polls for ten minutes")

        let id = try await worker.store.create(Person(name: "After the storm"))
        try await worker.engine.sync()
        try await eventually("the change came through the new stream") { try await coordinator.store.get(Person.self, id) != nil }
        // Live, and never polling: on a loaded machine (the whole suite at
        // once) a late heartbeat may have the stream opened again meanwhile,
        // which shows "connecting" for a moment (seen once in a clean-clone run).
        try await eventually("the channel is live after the change") { await coordinator.engine.currentStatus.live == .live }
        #expect(!seen.current.contains("polling"), "never long polls")
        await coordinator.engine.stop()
    }

    @Test func aSilentSocketIsFoundDeadWithinTwoHeartbeatsAndTheChannelComesBack() async throws {
        let rig = try await LiveSyncRig(heartbeatSeconds: 1)
        var options = SyncOptions()
        options.liveHeartbeat = .seconds(1)
        options.retry = RetryPolicy(base: .milliseconds(100), cap: .milliseconds(200))
        let device = try rig.device("c-1", name: "coordinator", role: .coordinator, options: options)
        device.transport.set(.silentAfterFirstChunk)
        await device.engine.start()
        try await eventually("live on the first heartbeat", timeout: Self.firstLive) { await device.engine.currentStatus.live == .live }
        let silentSince = ContinuousClock.now
        try await eventually("a second stream was opened", timeout: .seconds(10)) { device.transport.streamsOpened >= 2 }
        let detected = ContinuousClock.now - silentSince
        // Without the watchdog the silent stream would stay "live" forever;
        // two 1 s heartbeats plus reconnecting on a loaded machine fit in 8 s.
        #expect(detected < .seconds(8), "dead within two heartbeats (and reconnecting): \(detected)")
        device.transport.set(.passThrough)
        let worker = try rig.device("u-1", name: "worker")
        // The dead stream is found again, then a new one opens and gets its
        // first heartbeat: on a loaded full run that took longer than 10 s.
        try await eventually("live again", timeout: Self.firstLive) {
            if device.transport.streamsOpened < 3 { return false }
            return await device.engine.currentStatus.live == .live
        }
        let id = try await worker.store.create(Person(name: "After the dead socket"))
        try await worker.engine.sync()
        try await eventually("the change arrives on the new stream") { try await device.store.get(Person.self, id) != nil }
        await device.engine.stop()
    }

    @Test func anOldGenerationsAnswerAfterANewSnapshotIsDropped() async throws {
        let rig = try await LiveSyncRig()
        var options = SyncOptions()
        options.liveFirstEventLimit = .milliseconds(300)
        options.longPollWait = 5
        let device = try rig.device("c-1", name: "coordinator", role: .coordinator, options: options)
        device.transport.set(.buffering)
        let worker = try rig.device("u-1", name: "worker")
        let first = try await worker.store.create(Person(name: "First"))
        try await worker.engine.sync()
        await device.engine.start()
        try await eventually("polling", timeout: Self.firstLive) { await device.engine.currentStatus.live == .polling }
        device.transport.holdPolls()
        try await eventually("a long poll is on its way") { device.transport.heldPolls == 1 }
        // A real disconnection: the path drops and comes back. The engine
        // drops the old channel, takes a snapshot, then polls again.
        await device.engine.receive(PathHint(isConnected: false, isExpensive: false))
        let second = try await worker.store.create(Person(name: "Second"))
        try await worker.engine.sync()
        await device.engine.receive(PathHint(isConnected: true, isExpensive: false))
        try await eventually("the snapshot brought the second record") { try await device.store.get(Person.self, second) != nil }
        let cursorAfterSnapshot = try await device.store.pullState(collections: device.store.syncedCollections).cursor
        try await eventually("the new channel polls too") { device.transport.heldPolls == 2 }
        // The old poll's answer arrives late: the first record gone, an old cursor.
        let stale = #"{"changes":[{"collection":"people","uuid":""# + first.wireText
            + #"","deleted":true,"removed":true}],"cursor":"old","has_more":false,"server_time":"2026-01-01T00:00:00Z"}"#
        device.transport.releaseOldest(answering: Data(stale.utf8))
        try await eventually("the old poll was answered") { device.transport.heldPolls == 1 }
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await device.store.get(Person.self, first) != nil, "the old generation's answer changed nothing")
        #expect(try await device.store.pullState(collections: device.store.syncedCollections).cursor == cursorAfterSnapshot)
        let current = try #require(cursorAfterSnapshot).rawValue
        device.transport.releaseAll(
            answering: Data(#"{"changes":[],"cursor":"\#(current)","has_more":false,"server_time":"2026-01-01T00:00:00Z"}"#.utf8))
        await device.engine.stop()
    }

    /// Pull to refresh while live: the channel closes for the cycle's
    /// snapshot and reopens after it; the status shows that as connecting,
    /// never as off and back. Every step the status takes is kept, so a
    /// brief "off" is seen however fast or slow the reader is.
    @Test func aManualSyncWhileLiveNeverShowsTheChannelOff() async throws {
        let rig = try await LiveSyncRig()
        let device = try rig.device("c-1", name: "coordinator", role: .coordinator)
        await device.engine.start()
        try await eventually("live", timeout: Self.firstLive) { await device.engine.currentStatus.live == .live }
        let updates = await device.engine.statusUpdates(keeping: 1_000)
        let seen = Locked<[LiveChannelState]>([])
        let watcher = Task { for await status in updates { seen.withLock { $0.append(status.live) } } }
        defer { watcher.cancel() }
        try await device.engine.sync()
        try await eventually("live again after the cycle") { await device.engine.currentStatus.live == .live }
        try await Task.sleep(for: .milliseconds(100))
        #expect(seen.current.contains(.connecting), "\(seen.current)")
        #expect(!seen.current.contains(.off), "\(seen.current)")
        await device.engine.stop()
    }

    /// Starts `device`; Ana, created by `worker`, reaches it on its live
    /// channel. Then its network drops for a moment and Ana is renamed
    /// "Ana Maria" meanwhile. Returns Ana's id once the network is back.
    static func renameWhileAway(
        _ device: (store: LocalStore, engine: SyncEngine, transport: SpoilingTransport),
        _ worker: (store: LocalStore, engine: SyncEngine, transport: SpoilingTransport)
    ) async throws -> UUID {
        await device.engine.start()
        try await eventually("live", timeout: firstLive) { await device.engine.currentStatus.live == .live }
        let id = try await worker.store.create(Person(name: "Ana"))
        try await worker.engine.sync()
        try await eventually("the first stream brought Ana") { try await device.store.get(Person.self, id) != nil }
        await device.engine.receive(PathHint(isConnected: false, isExpensive: false))
        try await worker.store.update(Person.self, id) { $0.name = "Ana Maria" }
        try await worker.engine.sync()
        await device.engine.receive(PathHint(isConnected: true, isExpensive: false))
        return id
    }

    @Test func aLateDuplicateAfterAReconnectionIsDropped() async throws {
        let rig = try await LiveSyncRig()
        let device = try rig.device("c-1", name: "coordinator", role: .coordinator)
        let worker = try rig.device("u-1", name: "worker")
        device.transport.set(.replayPreviousStream)
        // The reconnection's snapshot brings the new name; then the new
        // stream also carries the first stream's old events.
        let id = try await Self.renameWhileAway(device, worker)
        try await eventually("the snapshot brought the new name") {
            try await device.store.get(Person.self, id)?.value.name == "Ana Maria"
        }
        try await eventually("the second stream is live") {
            if device.transport.streamsOpened < 2 { return false }
            return await device.engine.currentStatus.live == .live
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await device.store.get(Person.self, id)?.value.name == "Ana Maria")
        #expect(
            try await device.store.pullState(collections: device.store.syncedCollections).cursor?.rawValue
                == rig.feedEnd(user: "c-1", role: .coordinator, collections: device.store.syncedCollections),
            "the replayed old page did not move the feed position back")
        await device.engine.stop()
    }

    @Test func oldEventsRepeatedOnANewStreamByTheChaosProxyAreDropped() async throws {
        let rig = try await LiveSyncRig(heartbeatSeconds: 1)
        let proxy = try await rig.chaosProxy(.replayOldEvents)
        defer { proxy.stop() }
        let device = try rig.device("c-1", name: "coordinator", role: .coordinator, options: .quickLive, via: proxy.url)
        device.transport.plainStreams.withLock { $0 = true }
        let worker = try rig.device("u-1", name: "worker")
        // The reconnection's snapshot brings the new name, and the proxy
        // then repeats the first stream's event (Ana, as she was) on the
        // new stream, at the TCP level.
        let id = try await Self.renameWhileAway(device, worker)
        try await eventually("the proxy repeated the old event on the new stream", timeout: .seconds(20)) {
            proxy.lateDuplicatesInjected > 0
        }
        try await eventually("the second stream is live") { await device.engine.currentStatus.live == .live }
        // Heartbeats after the repeated event: it has been read and handled.
        try await Task.sleep(for: .milliseconds(1_500))
        #expect(try await device.store.get(Person.self, id)?.value.name == "Ana Maria", "the old event did not win")
        #expect(
            try await device.store.pullState(collections: device.store.syncedCollections).cursor?.rawValue
                == rig.feedEnd(user: "c-1", role: .coordinator, collections: device.store.syncedCollections),
            "the repeated old event did not move the feed position back")
        // The channel still works after the duplicate.
        let later = try await worker.store.create(Person(name: "After the duplicate"))
        try await worker.engine.sync()
        try await eventually("a new change still arrives") { try await device.store.get(Person.self, later) != nil }
        await device.engine.stop()
    }

    @Test func aSilentSocketThroughTheChaosProxyIsFoundDead() async throws {
        let rig = try await LiveSyncRig(heartbeatSeconds: 1)
        let proxy = try await rig.chaosProxy()
        defer { proxy.stop() }
        let device = try rig.device("c-1", name: "coordinator", role: .coordinator, options: .quickLive, via: proxy.url)
        await device.engine.start()
        try await eventually("live through the proxy", timeout: Self.firstLive) { await device.engine.currentStatus.live == .live }
        // The socket stays open; nothing passes any more, either way.
        proxy.mode = .silentOpen
        let silent = ContinuousClock.now
        try await eventually("the dead socket was noticed", timeout: .seconds(10)) {
            await device.engine.currentStatus.live != .live
        }
        #expect(ContinuousClock.now - silent < .seconds(8), "within two heartbeats, and a loaded machine's scheduling")
        proxy.mode = .pass
        // A reconnection after backoff; a loaded full run once took over 15 s.
        try await eventually("live again through a new connection", timeout: .seconds(45)) {
            await device.engine.currentStatus.live == .live
        }
        let worker = try rig.device("u-1", name: "worker")
        let id = try await worker.store.create(Person(name: "After the silence"))
        try await worker.engine.sync()
        try await eventually("the change arrives") { try await device.store.get(Person.self, id) != nil }
        await device.engine.stop()
    }

    @Test func theBackgroundClosesTheChannelAndTheForegroundSnapshotsFirst() async throws {
        // A parked stream's closed socket is noticed at its next heartbeat: one second here.
        let rig = try await LiveSyncRig(heartbeatSeconds: 1)
        var options = SyncOptions()
        options.liveHeartbeat = .seconds(1)
        let device = try rig.device("c-1", name: "coordinator", role: .coordinator, options: options)
        let worker = try rig.device("u-1", name: "worker")
        await device.engine.start()
        try await eventually("live", timeout: Self.firstLive) { await device.engine.currentStatus.live == .live }
        await device.engine.enteredBackground()
        #expect(await device.engine.currentStatus.live == .off)
        // Noticed at the parked stream's next heartbeat (1 s); a full run's
        // busiest minute has delayed that past 10 s.
        try await eventually("the server let the stream go", timeout: .seconds(30)) { rig.server.liveConnections == 0 }
        let id = try await worker.store.create(Person(name: "While in the background"))
        try await worker.engine.sync()
        await device.engine.enteredForeground()
        try await eventually("the foreground sync brought it") { try await device.store.get(Person.self, id) != nil }
        try await eventually("live again") { await device.engine.currentStatus.live == .live }
        await device.engine.stop()
    }
}

/// Streams through the reverse proxies people put in front of a server,
/// from the distribution, started by the test: haproxy and nginx pass
/// them as configured by default; an nginx told to buffer holds them back,
/// and the device falls back to long polls and still converges.
@Suite("Live sync through real proxies", .timeLimit(.minutes(3)))
struct ProxyLiveTests {
    static let firstLive = LiveSyncTests.firstLive

    @Test(arguments: [ReverseProxy.Kind.haproxy, .nginx])
    func streamsGoLiveThroughTheProxy(kind: ReverseProxy.Kind) async throws {
        try #require(ReverseProxy.isInstalled(kind), "scripts/ensure-deps installs \(kind.rawValue)")
        let rig = try await LiveSyncRig()
        let proxy = try await ReverseProxy(kind, upstreamPort: rig.http.port)
        try await waitUntilServing(proxy.base)
        let coordinator = try rig.device("c-1", name: "coordinator", role: .coordinator, via: proxy.base)
        let worker = try rig.device("u-1", name: "worker", via: proxy.base)
        await coordinator.engine.start()
        try await eventually("live through \(kind.rawValue)", timeout: Self.firstLive) { await coordinator.engine.currentStatus.live == .live }
        let id = try await worker.store.create(Person(name: "Through \(kind.rawValue)"))
        try await worker.engine.sync()
        let pushed = ContinuousClock.now
        try await eventually("the change came through the stream") { try await coordinator.store.get(Person.self, id) != nil }
        #expect(ContinuousClock.now - pushed < .seconds(5))
        #expect(await coordinator.engine.currentStatus.live == .live, "still a stream, not long polls")
        await coordinator.engine.stop()
    }

    @Test func aBufferingNginxMeansLongPollsAndTheDeviceStillConverges() async throws {
        try #require(ReverseProxy.isInstalled(.bufferingNginx), "scripts/ensure-deps installs nginx")
        let rig = try await LiveSyncRig()
        let proxy = try await ReverseProxy(.bufferingNginx, upstreamPort: rig.http.port)
        try await waitUntilServing(proxy.base)
        var options = SyncOptions()
        options.liveFirstEventLimit = .seconds(1)
        options.longPollWait = 5
        let coordinator = try rig.device("c-1", name: "coordinator", role: .coordinator, options: options, via: proxy.base)
        let worker = try rig.device("u-1", name: "worker", via: proxy.base)
        await coordinator.engine.start()
        try await eventually("the buffered stream was noticed", timeout: Self.firstLive) { await coordinator.engine.currentStatus.live == .polling }
        var ids: [UUID] = []
        for index in 0..<3 {
            ids.append(try await worker.store.create(Person(name: "Buffered \(index)")))
            try await worker.engine.sync()
        }
        let expected = ids
        try await eventually("every change arrived by long poll") {
            for id in expected where try await coordinator.store.get(Person.self, id) == nil { return false }
            return true
        }
        await coordinator.engine.stop()
    }
}
