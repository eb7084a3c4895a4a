import Foundation
import OutpostCore

/// Why a live channel's read ended without a server failure.
enum LiveEnd: Error {
    /// A newer channel (or a sync cycle's snapshot) replaced this one.
    case stale
    /// Streams do not get through to this server: something between
    /// buffers them, or nothing there serves them.
    case buffered
    /// No first event (or no headers) in time: a proxy that buffers, or a
    /// server too busy to answer anyone (`runLive` asks a plain pull which).
    case silent
    /// No byte for two heartbeat intervals: the socket is open but dead.
    case dead
    /// The device has no cursor yet: a sync cycle takes the snapshot first.
    case needsSnapshot
}

extension SyncEngine {
    /// Whether a live channel should run now: started, in the foreground,
    /// signed in, and turned on.
    var wantsLive: Bool {
        options.liveUpdates && (isStarted || (options.liveWithoutStart && !wasStopped)) && isInForeground && token != nil && !status.signInRequired
            && status.lastError != .accessRevoked && !status.updateRequired && connectivity.state != .offline
    }

    /// Opens the live channel from the stored cursor if it should run and
    /// does not: after a sync cycle got to the end of the feed, so it always
    /// follows a fresh snapshot.
    func ensureLive() {
        guard wantsLive, tasks.live == nil else { return }
        let generation = liveChannel.open()
        setLive(.connecting)
        tasks.live = Task { [weak self] in await self?.runLive(generation) }
    }

    /// Closes the live channel: its reads are cancelled and anything it
    /// still delivers is dropped (its generation is over). The status moves
    /// straight to `shown`: a channel that closes only to reopen says
    /// "connecting", and a listener never sees "off" in between.
    func stopLive(showing shown: LiveChannelState = .off) {
        liveChannel.close()
        tasks.cancelLive()
        setLive(shown)
    }

    /// The app went to the background: the OS suspends sockets there, so
    /// the channel is closed now rather than found dead later.
    /// ``enteredForeground()`` syncs, then opens it again.
    public func enteredBackground() {
        isInForeground = false
        stopLive()
    }

    /// Shows the channel's state (and the last event's server time) at
    /// once, without reading the store.
    func setLive(_ state: LiveChannelState, eventAt: ServerTimestamp? = nil) {
        statusPublisher.send(.live(state, eventAt: eventAt))
    }

    /// Waits for a live page being stored, so a sync cycle's own pull
    /// never lands before an older page of the channel it replaced.
    func awaitLiveApply() async {
        guard liveChannel.applying > 0 else { return }
        await withCheckedContinuation { liveChannel.waitForApplies($0) }
    }

    /// Sleeps on the engine's clock between the channel's attempts; the
    /// deadline is visible (``activity``) while this is the current channel.
    private func liveSleep(_ delay: Duration, _ generation: UInt64) async throws {
        liveChannel.sleeps(until: clock.now() + delay, generation: generation)
        defer { liveChannel.woke(generation: generation) }
        try await clock.sleep(for: delay)
    }

    private func runLive(_ generation: UInt64) async {
        liveChannel.loopStarted()
        defer { liveChannel.loopEnded() }
        var reconnection = LiveChannel.Reconnection()
        while !Task.isCancelled, liveChannel.isCurrent(generation) {
            do {
                if liveChannel.transport(now: clock.now()) == .longPoll {
                    setLive(.polling)
                    try await pollOnce(generation)
                } else {
                    do {
                        try await streamOnce(generation)
                        reconnection.streamEnded()
                    } catch LiveEnd.silent {
                        // Held back by something between, or a server too
                        // busy to answer anyone (a reconnect storm after a
                        // restart, where giving streams up for ten minutes
                        // would turn each later change into a thousand long
                        // polls). A plain pull tells which: answered promptly
                        // twice in a row, only streams are held back.
                        switch reconnection.silentStream(pullAnswered: try await pullAnswersPromptly(generation)) {
                        case .reconnect: break
                        case .heldBack: throw LiveEnd.buffered
                        case .noAnswer: throw SyncFailure.noAnswer
                        }
                    }
                    // The server ended the stream (its maximum duration):
                    // reconnect from the cursor, a moment later.
                    try await liveSleep(.milliseconds(Int64.random(in: 0...500, using: &random)), generation)
                }
                reconnection.succeeded()
            } catch LiveEnd.buffered {
                // Streams do not get through to this server: long polls for a
                // while (or until the network changes), and the status says so.
                liveChannel.streamsHeldBack(now: clock.now())
            } catch LiveEnd.needsSnapshot {
                break
            } catch let failure as SyncFailure where failure.needsCycle {
                // A refused token, a needed re-download, an update: the sync
                // cycle handles those, then opens the channel again.
                if liveChannel.isCurrent(generation) {
                    tasks.live = nil
                    setLive(.off)
                    trigger(.liveChannel)
                }
                return
            } catch is CancellationError {
                break
            } catch LiveEnd.stale {
                break
            } catch {
                guard liveChannel.isCurrent(generation), !Task.isCancelled else { break }
                let failure = (error as? SyncFailure) ?? .noAnswer
                if failure == .offline {
                    await record(.notSent)
                    // The OS says there is no network: its path monitor tells
                    // of the return, and the cycle then reopens the channel.
                    if connectivity.hint?.isConnected == false { break }
                    // Otherwise the connection was refused (a proxy or a
                    // server restarting) or no path monitor speaks: the
                    // channel tries again on its own backoff, never left off
                    // until the next periodic sync.
                } else {
                    // Not now (a dead socket, no answer, a busy server): say so.
                    await record(failure == .noAnswer ? .noAnswer : .serverStruggling)
                }
                // Reconnect after a backoff with full jitter.
                setLive(.connecting)
                let delay: Duration
                let attempt = reconnection.failed()
                if case .serverBusy(let retryAfter?) = failure {
                    delay = options.retry.delay(retryAfter: retryAfter, random: &random)
                } else {
                    delay = options.retry.delay(afterAttempt: attempt, random: &random)
                }
                do { try await liveSleep(delay, generation) } catch { break }
            }
        }
        if liveChannel.isCurrent(generation) {
            tasks.live = nil
            setLive(.off)
        }
    }

    /// Where the channel starts: the stored cursor, and the cycle's plan.
    typealias LivePosition = (collections: [String], windowStart: ServerTimestamp?, cursor: PullCursor)

    private func livePosition() async throws -> LivePosition {
        let collections = store.syncedCollections
        guard let cursor = try await store.pullState(collections: collections).cursor else { throw LiveEnd.needsSnapshot }
        let windowStart = try await store.metadata("scope.window_start").map(ServerTimestamp.init(rawValue:))
        return (collections, windowStart, cursor)
    }

    /// One stream, read until the server ends it or it fails.
    private func streamOnce(_ generation: UInt64) async throws {
        let position = try await livePosition()
        var target = "/v1/stream?collections=\(position.collections.joined(separator: ","))"
        target += "&cursor=\(ServerClient.escape(position.cursor.rawValue))"
        if let windowStart = position.windowStart { target += "&window_start=\(ServerClient.escape(windowStart.rawValue))" }
        // A proxy that buffers may hold the headers back too (nginx sends
        // them with the first compressed bytes): the first-event limit
        // covers them.
        let headerLimit = min(options.requestTimeout, Self.seconds(options.liveFirstEventLimit))
        let request = TransportRequest(
            method: "GET", target: target, headers: client.headers(accept: "text/event-stream"), timeout: headerLimit)
        let started = clock.now()
        let stream: TransportStream
        do {
            stream = try await transport.openStream(request)
        } catch TransportError.streamsUnsupported {
            throw LiveEnd.buffered
        } catch let error as TransportError {
            if error.isNotSent { throw SyncFailure.offline }
            // No headers in time: held back, or a server too busy to answer.
            if case .noAnswer = error { throw LiveEnd.silent }
            throw SyncFailure.noAnswer
        }
        guard liveChannel.isCurrent(generation) else { throw LiveEnd.stale }
        if [404, 405, 501].contains(stream.status) {
            // A server (or a proxy) without streams: long polls instead.
            throw LiveEnd.buffered
        }
        if stream.status != 200 {
            var body = Data()
            for try await chunk in stream.bytes {
                body += chunk
                if body.count > 65_536 { break }
            }
            throw ServerClient.failure(for: TransportResponse(status: stream.status, headers: stream.headers, body: body))
        }
        await record(.answered(latency: clock.now() - started))
        // Before any change comes: the first one then finds its statements ready.
        await store.preparePageStatements()
        let lastByte = Locked(clock.now())
        let sawEvent = Locked(false)
        let clock = self.clock
        let heartbeat = options.liveHeartbeat
        let firstEventLimit = options.liveFirstEventLimit
        let collections = position.collections
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { [weak self] in
                var parser = ServerEventParser()
                for try await chunk in stream.bytes {
                    lastByte.withLock { $0 = clock.now() }
                    for event in parser.feed(chunk) {
                        sawEvent.withLock { $0 = true }
                        guard let self else { return }
                        try await self.receiveLive(event, generation: generation, collections: collections)
                    }
                }
            }
            let watch = liveChannel.watchdog
            group.addTask {
                // The watchdog: a socket can be open while nothing flows.
                let step = min(heartbeat, firstEventLimit) / 4
                defer { watch.withLock { if $0?.generation == generation { $0 = nil } } }
                while true {
                    watch.withLock { $0 = (generation, clock.now() + step) }
                    try await clock.sleep(for: step)
                    let silent = clock.now() - lastByte.current
                    if !sawEvent.current && silent >= firstEventLimit { throw LiveEnd.silent }
                    if silent >= heartbeat * 2 { throw LiveEnd.dead }
                }
            }
            defer { group.cancelAll() }
            do {
                try await group.next()
            } catch LiveEnd.dead {
                throw SyncFailure.noAnswer
            } catch let error as TransportError {
                throw error.isNotSent ? SyncFailure.offline : SyncFailure.noAnswer
            }
        }
    }

    /// One event of the stream, on the engine: dropped when its channel is over.
    private func receiveLive(_ event: ServerEvent, generation: UInt64, collections: [String]) async throws {
        guard liveChannel.isCurrent(generation) else { throw LiveEnd.stale }
        switch event.name {
        case LiveEventName.heartbeat.rawValue:
            struct Beat: Decodable { var serverTime: ServerTimestamp
                init(from decoder: any Decoder) throws { serverTime = try decoder.container(keyedBy: WireKey.self).decode(ServerTimestamp.self, forKey: .serverTime) } }
            let time = try? WireCoding.decode(Beat.self, from: event.data).serverTime
            setLive(.live, eventAt: time)
        case LiveEventName.changes.rawValue:
            let page: RawPullPage
            do {
                page = try RawPullPage.parse(event.data)
            } catch {
                throw SyncFailure.invalidAnswer("a live event is not a page of changes: \(error)")
            }
            // A page whose every change is one this device already holds (a
            // late duplicate across a reconnection) is dropped whole: storing
            // its cursor would move the feed position back.
            if liveChannel.isLateDuplicate(page) {
                setLive(.live, eventAt: page.serverTime)
                return
            }
            try await storeLive(page, generation: generation, collections: collections)
            setLive(.live, eventAt: page.serverTime)
        case LiveEventName.error.rawValue:
            let body = (try? WireCoding.decode(ErrorBody.self, from: event.data))
                ?? ErrorBody(code: .unavailable, message: "The live channel ended with an error.")
            throw Self.failure(forLiveError: body)
        default:
            break  // Events this version does not know are skipped.
        }
    }

    /// Stores a page and its cursor in one transaction, unless the channel
    /// was replaced meanwhile; local edits waiting are kept, as in a pull.
    private func storeLive(_ page: RawPullPage, generation: UInt64, collections: [String]) async throws {
        guard liveChannel.isCurrent(generation) else { throw LiveEnd.stale }
        // Straight onto the store's queue and back, no task of its own: the
        // status's figures a page can move (counts, sync times) are read
        // in the same call, unless read less than 200 ms ago.
        let epoch = statusPublisher.epoch
        let figuresDue = statusPublisher.liveFiguresDue(now: clock.now())
        liveChannel.applyStarted()
        defer { liveChannel.applyEnded() }
        let (result, figures) = try await store.applyLivePage(page, collections: collections, readingFigures: figuresDue)
        liveChannel.stored(page)
        // Deletes the page queued (records this device deleted came back),
        // and changes it freed from behind a refused create, are pushed now.
        if result.redeleted + result.unblocked > 0 { trigger(.localChange) }
        if !eventListeners.isEmpty, !page.changes.isEmpty { emit(.received(ReceivedChange.all(in: page))) }
        if let figures {
            statusPublisher.send(.figures(figures, epoch: epoch, connectivity: connectivity.state, scopeTotals: scopeTotals))
        } else {
            refreshStatusSoon()
        }
    }

    /// Whether the server answers a plain pull within half the first-event
    /// limit, asked right after a stream said nothing in that limit; its
    /// page is stored like any. No answer in time is `false`; any other
    /// failure is thrown.
    private func pullAnswersPromptly(_ generation: UInt64) async throws -> Bool {
        let pulled: (page: RawPullPage, position: LivePosition)
        do {
            pulled = try await pullFromLivePosition(generation, wait: nil, timeout: Self.seconds(options.liveFirstEventLimit) / 2)
        } catch SyncFailure.noAnswer {
            return false
        }
        try await storeIfMoved(pulled.page, from: pulled.position, generation: generation)
        return true
    }

    /// One long poll: the next page, or an empty one when the wait ran out.
    private func pollOnce(_ generation: UInt64) async throws {
        let started = clock.now()
        let (page, position) = try await pullFromLivePosition(
            generation, wait: options.longPollWait, timeout: TimeInterval(options.longPollWait) + options.requestTimeout)
        await record(.answered(latency: .zero))
        try await storeIfMoved(page, from: position, generation: generation)
        setLive(.polling, eventAt: page.serverTime)
        // A server that does not hold long polls answers at once: never a hot loop.
        if page.changes.isEmpty && clock.now() - started < .seconds(1) {
            try await liveSleep(.seconds(1), generation)
        }
    }

    /// A pull from the channel's position (a long poll with `wait`);
    /// failures as `SyncFailure`s.
    private func pullFromLivePosition(_ generation: UInt64, wait: Int?, timeout: TimeInterval)
        async throws -> (page: RawPullPage, position: LivePosition)
    {
        let position = try await livePosition()
        var puller = client
        puller.timeout = timeout
        let answer: ServerClient.Answer<RawPullPage>
        do {
            answer = try await puller.pull(
                collections: position.collections, cursor: position.cursor, limit: options.pullPageSize,
                windowStart: position.windowStart, wait: wait)
        } catch let failure as ServerClient.Failure {
            throw failure.failure
        }
        guard liveChannel.isCurrent(generation) else { throw LiveEnd.stale }
        return (answer.body, position)
    }

    /// Stores a pulled page, unless it moved nothing.
    private func storeIfMoved(_ page: RawPullPage, from position: LivePosition, generation: UInt64) async throws {
        guard !page.changes.isEmpty || page.cursor != position.cursor else { return }
        try await storeLive(page, generation: generation, collections: position.collections)
    }

    static func seconds(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    static func failure(forLiveError body: ErrorBody) -> SyncFailure {
        switch body.code {
        case .unauthenticated, .tokenExpired: return .signInRequired
        case .tokenRevoked: return .accessRevoked
        case .upgradeRequired: return .updateRequired
        case .unavailable, .rateLimited: return .serverBusy(retryAfter: nil)
        default: return .refused(body)
        }
    }
}

extension SyncFailure {
    /// Failures of the live channel that only a sync cycle can deal with.
    var needsCycle: Bool {
        switch self {
        case .signInRequired, .accessRevoked, .updateRequired: return true
        case .refused(let body): return body.code == .resyncRequired
        default: return false
        }
    }
}

extension TransportError {
    var isNotSent: Bool {
        if case .notSent = self { return true }
        return false
    }
}
