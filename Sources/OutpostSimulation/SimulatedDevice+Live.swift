import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting

/// What one live step moved.
public enum LiveStepOutcome: Sendable, Equatable {
    /// Nothing was waiting.
    case nothing
    /// Only time: an empty long poll, a heartbeat, a backoff passing.
    case time
    /// Events, a stream opened or ended, a fault.
    case data
}

/// The live channel of a simulated device, one awaited step at a time.
extension SimulatedDevice {
    /// Waits until the engine's background work is blocked on something
    /// the simulation controls: no cycle runs, and the live loop (if any)
    /// waits for an answer in the line, for bytes on its stream, or on the
    /// device's clock. Replaced channels still waiting are held-back reads.
    /// Fails naming what it saw when that takes longer than `timeout`.
    public func settleLive(within timeout: Duration = .seconds(30)) async throws {
        let giveUp = ContinuousClock.now + timeout
        while true {
            await engine.waitForIdle()
            let probe = await engine.activity
            let line = network.live.snapshot
            if Self.isSettled(probe, line, deadlines: monotonic.pendingDeadlines, now: monotonic.now()) { return }
            guard ContinuousClock.now < giveUp else {
                throw WaitTimedOut("\(name)'s live channel settles", timeout: timeout, detail: "\(probe); \(line)")
            }
            try await Task.sleep(for: .microseconds(200))
        }
    }

    static func isSettled(
        _ probe: SyncEngine.ActivityProbe, _ line: SimulatedLiveLine.Snapshot, deadlines: [Duration], now: Duration
    ) -> Bool {
        guard !probe.cycleRunning else { return false }
        // A timer due now is about to act; one not yet asleep would, once
        // asleep, count from a later time if the clock moved first.
        for timer in probe.timers where timer <= now || !deadlines.contains(timer) { return false }
        guard probe.liveLoops == (probe.channelOpen ? 1 : 0) + line.heldBackWaiting else { return false }
        guard probe.channelOpen else { return true }
        if line.waiting != nil { return true }
        if line.readerWaiting {
            // The stream's watchdog must be asleep too, or a silence the
            // simulation makes next would be measured from a later time.
            guard let watchdog = probe.watchdogUntil else { return false }
            return deadlines.contains(watchdog)
        }
        if let until = probe.sleepingUntil { return deadlines.contains(until) }
        return false
    }

    /// One step of the live channel, as the network and the server would
    /// take it, with a fault now and then (`faultRate` percent): answers a
    /// waiting open or long poll, delivers what the server's stream has,
    /// stalls or cuts the stream, repeats an old event, hands a replaced
    /// channel's read a stale event, or lets a sleeping loop's time pass.
    /// Says what moved: data (events, an open, a reset), only time (an
    /// empty long poll, a backoff passing), or nothing.
    @discardableResult
    func liveStep(random: inout SeededRandom, faultRate: Int, trace: (String) -> Void) async throws -> LiveStepOutcome {
        try await settleLive()
        let faulty = random.next() % 100 < UInt64(faultRate)
        let kind = random.next() % 5
        let live = network.live
        if let waiting = live.takeWaiting() {
            let outcome = try answer(waiting, faulty: faulty && kind < 2, kind: kind, trace: trace)
            try await settleLive()
            return outcome
        }
        if faulty, kind == 2, let stale = live.takeHeldBack() {
            // A read of a channel a snapshot replaced hands over an old event.
            let event = live.earlierEvent(pick: random.next()) ?? Data("event: heartbeat\ndata: {}\n\n".utf8)
            trace("live: stale event to a replaced channel")
            network.count(.liveStaleGeneration)
            stale.deliver(event)
            // Nothing more comes on that socket, whatever the engine does with the event.
            stale.finish()
            try await settleLive()
            return .data
        }
        if let stream = live.currentWaiting {
            if network.isPartitioned || (faulty && kind == 0) {
                // The socket stays open and nothing passes: two heartbeats of
                // silence on the device's clock, and the watchdog must see it.
                trace("live: silent socket")
                network.count(.liveStall)
                monotonic.advance(by: liveSilenceLimit + .seconds(1))
                try await settleLive()
                return .data
            }
            if faulty && kind == 1 {
                trace("live: connection reset")
                network.count(.liveCut)
                stream.fail(TransportError.noAnswer("the stream's connection was reset"))
                try await settleLive()
                return .data
            }
            if faulty && kind == 3, let old = live.earlierEvent(pick: random.next()) {
                trace("live: late duplicate")
                network.count(.liveLateDuplicate)
                stream.deliver(old)
                try await settleLive()
                return .data
            }
            let (bytes, ended) = stream.serverBytes()
            if !bytes.isEmpty {
                live.remember(bytes)
                // Sometimes in two reads split anywhere: events cross chunk boundaries.
                let split = bytes.count > 1 && random.next() % 2 == 0 ? Int(random.next() % UInt64(bytes.count - 1)) + 1 : bytes.count
                let parts = split < bytes.count ? [bytes.prefix(split), bytes.dropFirst(split)] : [bytes]
                trace("live: \(ServerEventText.split(bytes).count) events delivered in \(parts.count) reads")
                for part in parts {
                    guard let current = live.currentWaiting, current === stream else { break }
                    stream.deliver(Data(part))
                    try await settleLive()
                }
            }
            if ended {
                trace("live: the server ended the stream")
                stream.finish()
                try await settleLive()
            }
            if ended { return .data }
            return ServerEventText.split(bytes).contains(where: ServerEventText.isChanges)
                ? .data : bytes.isEmpty ? .nothing : .time
        }
        if let until = await engine.activity.sleepingUntil {
            // The loop waits (a backoff, a pause before reconnecting): its time passes.
            monotonic.advance(by: until - monotonic.now())
            try await settleLive()
            return .time
        }
        if let timer = await engine.activity.timers.min() {
            // Nothing but a timer (a reconnection's jittered sync): its time passes.
            monotonic.advance(by: timer - monotonic.now())
            try await settleLive()
            return .time
        }
        return .nothing
    }

    /// Answers the live loop's waiting request: through the real server's
    /// stream or long poll, or with a fault.
    private func answer(
        _ waiting: SimulatedLiveLine.Waiting, faulty: Bool, kind: UInt64, trace: (String) -> Void
    ) throws -> LiveStepOutcome {
        switch waiting {
        case .open(let request, let continuation):
            if network.isPartitioned {
                trace("live: stream open, partitioned")
                continuation.resume(throwing: TransportError.notSent("partitioned"))
            } else if faulty && kind == 0 {
                trace("live: stream open dropped")
                network.count(.liveOpenFailed)
                continuation.resume(throwing: TransportError.noAnswer("no answer to the stream open"))
            } else if faulty && network.roll(2) == 0 {
                // A reconnect storm: nothing is answered in time, the
                // stream's headers nor the plain pull the engine asks next.
                trace("live: stream open meets a server too busy to answer")
                network.count(.liveOpenBusy)
                network.makeNextRequestBusy()
                continuation.resume(throwing: TransportError.noAnswer("no answer to the stream open"))
            } else if faulty {
                trace("live: stream open answered 503")
                network.count(.liveOpenFailed)
                let busy = SimulatedNetwork.errorResponse(503, retryAfter: 2)
                continuation.resume(returning: Self.finished(busy))
            } else {
                switch network.server.answer(request) {
                case .stream(let stream):
                    trace("live: stream opened")
                    let opened = network.live.opened(stream)
                    continuation.resume(returning: TransportStream(
                        status: 200, headers: ["Content-Type": "text/event-stream"], bytes: opened.bytes))
                case .now(let response):
                    trace("live: stream refused \(response.status)")
                    continuation.resume(returning: Self.finished(
                        TransportResponse(status: response.status, headers: response.headers, body: Data(response.body))))
                case .wait(let poll):
                    poll.abandon()
                    continuation.resume(throwing: TransportError.noAnswer("a stream answered as a long poll"))
                }
            }
        case .poll(let request, let continuation):
            if network.isPartitioned {
                trace("live: long poll, partitioned")
                continuation.resume(throwing: TransportError.notSent("partitioned"))
            } else if faulty {
                trace("live: long poll dropped")
                network.count(.liveOpenFailed)
                continuation.resume(throwing: TransportError.noAnswer("no answer to the long poll"))
            } else {
                // In process a long poll answers at once: what it would send
                // when woken, or an empty page when its wait ran out.
                let response = network.server.server.handle(ServerTransport.httpRequest(request))
                trace("live: long poll answered \(response.status)")
                continuation.resume(returning: TransportResponse(
                    status: response.status, headers: response.headers, body: Data(response.body)))
                // An empty page is only time passing; anything else moves the device.
                let page = response.status == 200 ? try? RawPullPage.parse(Data(response.body)) : nil
                return page?.changes.isEmpty == true ? .time : .data
            }
        }
        return .data
    }

    /// A whole answer as a stream that has already ended.
    private static func finished(_ response: TransportResponse) -> TransportStream {
        let body = response.body
        return TransportStream(
            status: response.status, headers: response.headers,
            bytes: AsyncThrowingStream { continuation in
                continuation.yield(body)
                continuation.finish()
            })
    }

    /// Silence for this long is a dead socket to the engine.
    var liveSilenceLimit: Duration { SyncOptions().liveHeartbeat * 2 }

    /// Gives the current stream's next cancelled read to a later stale
    /// event (see ``SimulatedStream/arm()``), around a cycle the
    /// simulation awaits.
    public func holdingBackTheChannel<Value>(_ hold: Bool, _ body: () async throws -> Value) async rethrows -> Value {
        let stream = hold ? network.live.currentWaiting : nil
        stream?.arm()
        defer { stream?.disarm() }
        return try await body()
    }

    /// Ends everything the live line holds (the process died, or the run is over).
    public func closeLiveLine() {
        network.live.processDied()
    }
}
