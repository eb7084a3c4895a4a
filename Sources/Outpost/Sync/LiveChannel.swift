import Foundation
import OutpostCore

/// The live channel's state, as a value: which channel is current, how it
/// reaches the server, how far the feed got, and what its loops are doing.
/// The engine sends it events and performs the I/O (`SyncEngine+Live.swift`).
package struct LiveChannel {
    /// Bumped whenever a channel opens or closes: a closed channel's late events are dropped.
    package private(set) var generation: UInt64 = 0
    /// Until then (monotonic), streams do not reach this server (a buffering
    /// proxy): long polls instead. A network change tries streams again.
    package private(set) var streamsHeldBackUntil: Duration?
    /// The newest feed version stored from a pull or the channel: a live
    /// page with nothing newer is a late duplicate.
    package private(set) var feedHighWater: Int64 = 0
    /// Loops running, the current one and any replaced one still finishing
    /// a read (the simulation waits for them to settle).
    package private(set) var loopsRunning = 0
    /// When the current channel's loop sleeps (a backoff, a reconnection
    /// pause): until when, on the engine's clock.
    package private(set) var sleepingUntil: Duration?
    /// Live pages being stored (a cycle's pull waits for them), and who waits.
    package private(set) var applying = 0
    private var applyWaiters: [CheckedContinuation<Void, Never>] = []
    /// Until when the open stream's watchdog sleeps (it runs off the actor, hence the lock).
    let watchdog = Locked<(generation: UInt64, until: Duration)?>(nil)

    /// How long a server whose streams were held back is long-polled before streams are tried again.
    package static let heldBackStreamsRetry: Duration = .seconds(600)

    package init() {}

    /// How the channel asks for changes.
    package enum Transport: Equatable {
        case stream
        /// Streams are held back on the way: long polls.
        case longPoll
    }

    // MARK: Channels

    /// A channel opens; returns its generation.
    package mutating func open() -> UInt64 {
        generation += 1
        return generation
    }

    /// The channel closes: whatever it still delivers is stale.
    package mutating func close() {
        generation += 1
        sleepingUntil = nil
    }

    /// The engine stopped: the channel's generation is over. (Unlike
    /// ``close()``, the loop's sleep deadline stays as the probe last saw it.)
    package mutating func abandon() { generation += 1 }

    /// Whether `generation` is the channel now.
    package func isCurrent(_ generation: UInt64) -> Bool { generation == self.generation }

    /// How the channel reaches the server at monotonic time `now`.
    package func transport(now: Duration) -> Transport {
        if let until = streamsHeldBackUntil, now < until { return .longPoll }
        return .stream
    }

    /// Streams did not get through: long polls until `now` plus the retry wait.
    package mutating func streamsHeldBack(now: Duration) {
        streamsHeldBackUntil = now + Self.heldBackStreamsRetry
    }

    /// Another network may not have the proxy that held streams back.
    package mutating func networkChanged() { streamsHeldBackUntil = nil }

    // MARK: The feed

    /// Whether every change of `page` is one the device already stored (a
    /// late duplicate across a reconnection): storing its cursor would move
    /// the feed position back.
    package func isLateDuplicate(_ page: RawPullPage) -> Bool {
        guard let newest = page.changes.map(\.version).max() else { return false }
        return newest > 0 && newest <= feedHighWater
    }

    /// A page was stored (by a pull or the channel).
    package mutating func stored(_ page: RawPullPage) {
        if let newest = page.changes.map(\.version).max() { feedHighWater = max(feedHighWater, newest) }
    }

    /// The store was wiped: no feed position is held.
    package mutating func wiped() { feedHighWater = 0 }

    /// A live page is being stored (by the channel's own read, with no task of its own).
    package mutating func applyStarted() { applying += 1 }

    /// A live page is stored (or failed): once none is, the waiters go on.
    package mutating func applyEnded() {
        applying -= 1
        guard applying == 0 else { return }
        let waiters = applyWaiters
        applyWaiters = []
        waiters.forEach { $0.resume() }
    }

    /// Waits for the pages being stored now (a cycle's pull must not land
    /// before an older page of the channel it replaced).
    package mutating func waitForApplies(_ waiter: CheckedContinuation<Void, Never>) {
        if applying == 0 { waiter.resume() } else { applyWaiters.append(waiter) }
    }

    // MARK: Loops

    package mutating func loopStarted() { loopsRunning += 1 }
    package mutating func loopEnded() { loopsRunning -= 1 }

    /// The loop of `generation` sleeps until `until`; only the current channel's sleep is shown.
    package mutating func sleeps(until: Duration, generation: UInt64) {
        if isCurrent(generation) { sleepingUntil = until }
    }

    /// The loop of `generation` woke.
    package mutating func woke(generation: UInt64) {
        if isCurrent(generation) { sleepingUntil = nil }
    }

    /// Until when the current stream's watchdog sleeps, if one runs.
    package var watchdogUntil: Duration? {
        watchdog.current.flatMap { $0.generation == generation ? $0.until : nil }
    }
}

extension LiveChannel {
    /// One loop's reconnection state: its attempts after failures, and
    /// streams that said nothing although plain pulls were answered.
    package struct Reconnection: Equatable {
        /// Failures in a row: the backoff grows with them.
        package private(set) var failures = 0
        /// Silent streams whose plain pull was answered promptly.
        package private(set) var silentStreams = 0

        package init() {}

        /// What a silent stream means, once a plain pull was asked.
        package enum AfterSilence: Equatable {
            /// Reconnect the stream after a short pause.
            case reconnect
            /// Twice in a row the server answered a pull but not a stream:
            /// something on the way holds streams back.
            case heldBack
            /// The server answers nobody in time: a failure like any.
            case noAnswer
        }

        /// A stream ran until the server ended it.
        package mutating func streamEnded() { silentStreams = 0 }

        /// A stream said nothing in time; `pullAnswered`: a plain pull asked
        /// right after was answered promptly.
        package mutating func silentStream(pullAnswered: Bool) -> AfterSilence {
            guard pullAnswered else {
                silentStreams = 0
                return .noAnswer
            }
            silentStreams += 1
            return silentStreams >= 2 ? .heldBack : .reconnect
        }

        /// A read went through: the backoff starts over.
        package mutating func succeeded() { failures = 0 }

        /// A read failed; returns the attempt number the backoff is reckoned from.
        package mutating func failed() -> Int {
            failures += 1
            return failures - 1
        }
    }
}
