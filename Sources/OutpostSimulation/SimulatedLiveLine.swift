import Foundation
import Outpost
import OutpostCore
import OutpostServer

/// A device's live channel in the simulation.
///
/// The engine's live loop runs in a task of its own, so left alone it
/// would read from the server whenever the scheduler let it, and a seed
/// would not replay. Here it cannot: a stream it opens, or a long poll it
/// sends, waits in this line until the simulation resolves it, and a
/// stream's bytes reach the engine only when the simulation delivers them.
/// Every read the server does for the channel happens inside a step the
/// simulation awaits.
public final class SimulatedLiveLine: Sendable {
    /// A request of the live loop, waiting for the simulation.
    enum Waiting {
        case open(TransportRequest, CheckedContinuation<TransportStream, any Error>)
        case poll(TransportRequest, CheckedContinuation<TransportResponse, any Error>)

        var kind: String {
            switch self {
            case .open: return "stream open"
            case .poll: return "long poll"
            }
        }
    }

    private struct State {
        var waiting: (id: UInt64, request: Waiting)?
        /// Requests cancelled before they were registered.
        var cancelled: Set<UInt64> = []
        var nextID: UInt64 = 0
        /// The newest stream opened.
        var current: SimulatedStream?
        /// Replaced streams whose last read was cancelled but not released:
        /// a late answer of an older generation, delivered later.
        var heldBack: [SimulatedStream] = []
        /// `changes` events delivered since the device's process started:
        /// what a late duplicate repeats.
        var history: [Data] = []
    }

    private let state = Locked(State())

    init() {}

    // MARK: The engine's side

    /// `openStream`: waits until the simulation answers.
    func open(_ request: TransportRequest) async throws -> TransportStream {
        try await wait { .open(request, $0) }
    }

    /// A long poll: waits until the simulation answers.
    func poll(_ request: TransportRequest) async throws -> TransportResponse {
        try await wait { .poll(request, $0) }
    }

    private func wait<Value>(_ make: @escaping (CheckedContinuation<Value, any Error>) -> Waiting) async throws -> Value {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                let outcome = state.withLock { state -> Registration in
                    if state.cancelled.remove(id) != nil { return .cancelled }
                    let older = state.waiting?.request
                    state.waiting = (id, make(continuation))
                    return .registered(replacing: older)
                }
                switch outcome {
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .registered(let older): if let older { Self.release(older) }
                }
            }
        } onCancel: {
            let taken = state.withLock { state -> Waiting? in
                guard let waiting = state.waiting, waiting.id == id else {
                    state.cancelled.insert(id)
                    return nil
                }
                state.waiting = nil
                return waiting.request
            }
            if let taken { Self.release(taken) }
        }
    }

    private enum Registration {
        case cancelled
        case registered(replacing: Waiting?)
    }

    /// Ends a waiting request as cancelled.
    private static func release(_ waiting: Waiting) {
        switch waiting {
        case .open(_, let continuation): continuation.resume(throwing: CancellationError())
        case .poll(_, let continuation): continuation.resume(throwing: CancellationError())
        }
    }

    // MARK: The simulation's side

    /// Takes the request waiting, for the simulation to answer.
    func takeWaiting() -> Waiting? {
        state.withLock { state in
            defer { state.waiting = nil }
            return state.waiting?.request
        }
    }

    /// What the line holds now (the simulation's settle check reads it).
    struct Snapshot: Sendable, CustomStringConvertible {
        var waiting: String?
        var readerWaiting: Bool
        var heldBackWaiting: Int

        var description: String {
            "waiting: \(waiting ?? "nothing"), reader waiting: \(readerWaiting), held back: \(heldBackWaiting)"
        }
    }

    var snapshot: Snapshot {
        state.withLock { state in
            Snapshot(
                waiting: state.waiting?.request.kind, readerWaiting: state.current?.isReaderWaiting ?? false,
                heldBackWaiting: state.heldBack.filter(\.isReaderWaiting).count)
        }
    }

    /// The newest stream, when its reader waits for bytes.
    var currentWaiting: SimulatedStream? {
        state.withLock { state in state.current.flatMap { $0.isReaderWaiting ? $0 : nil } }
    }

    /// Wraps the server's stream as the one the engine reads now.
    func opened(_ live: LiveStream) -> SimulatedStream {
        let stream = SimulatedStream(live: live) { [weak self] stream in
            self?.state.withLock { state in
                state.heldBack.append(stream)
                // Held back, it is no longer the stream the engine reads.
                if state.current === stream { state.current = nil }
            }
        }
        state.withLock { $0.current = stream }
        return stream
    }

    /// The newest stream, whether or not a read waits on it.
    var current: SimulatedStream? { state.withLock { $0.current } }

    /// The oldest held-back stream whose reader still waits.
    func takeHeldBack() -> SimulatedStream? {
        state.withLock { state in
            guard let index = state.heldBack.firstIndex(where: \.isReaderWaiting) else {
                state.heldBack.removeAll()
                return nil
            }
            return state.heldBack.remove(at: index)
        }
    }

    /// Remembers the `changes` events among delivered bytes.
    func remember(_ bytes: Data) {
        let events = ServerEventText.split(bytes).filter(ServerEventText.isChanges)
        guard !events.isEmpty else { return }
        state.withLock { state in
            state.history += events
            if state.history.count > 12 { state.history.removeFirst(state.history.count - 12) }
        }
    }

    /// One earlier `changes` event, picked by `pick`.
    func earlierEvent(pick: UInt64) -> Data? {
        state.withLock { state in state.history.isEmpty ? nil : state.history[Int(pick % UInt64(state.history.count))] }
    }

    /// The server lost its power and started again: the stream the device
    /// reads is reset (its connection died with the server), and streams
    /// held back end.
    func serverRestarted() {
        let (current, held) = state.withLock { state -> (SimulatedStream?, [SimulatedStream]) in
            defer {
                state.current = nil
                state.heldBack.removeAll()
            }
            return (state.current, state.heldBack)
        }
        _ = current?.fail(TransportError.noAnswer("the server went down; the stream's connection was reset"))
        for stream in held { stream.finish() }
    }

    /// The device's process died: every waiting request and read ends, and
    /// nothing of this process's channel can arrive any more.
    func processDied() {
        let (waiting, streams) = state.withLock { state -> (Waiting?, [SimulatedStream]) in
            defer {
                state.waiting = nil
                state.current = nil
                state.heldBack.removeAll()
                state.history.removeAll()
            }
            return (state.waiting?.request, state.heldBack + (state.current.map { [$0] } ?? []))
        }
        if let waiting { Self.release(waiting) }
        for stream in streams { stream.finish() }
    }
}

/// One stream as the engine reads it in the simulation: the server's
/// ``LiveStream`` is read only when the simulation says so, and its bytes
/// go to the engine's waiting read.
final class SimulatedStream: Sendable {
    private struct State {
        var reader: CheckedContinuation<Data?, any Error>?
        var finished = false
        var cancelled = false
        var closedOnServer = false
        /// The next cancelled read is held back rather than ended.
        var holdsNextCancel = false
    }

    private let live: LiveStream
    private let state = Locked(State())
    /// Told when a cancelled read is held back.
    private let heldBack: @Sendable (SimulatedStream) -> Void

    init(live: LiveStream, heldBack: @escaping @Sendable (SimulatedStream) -> Void) {
        self.live = live
        self.heldBack = heldBack
    }

    /// Until ``disarm()``, a read the engine cancels (its channel replaced
    /// by a sync cycle's snapshot) stays waiting: a socket that still hands
    /// over bytes it had read, a late answer of an older generation. Only
    /// armed around a cycle the simulation awaits, never for the channel's
    /// own watchdog, which must end its read to go on.
    func arm() { state.withLock { $0.holdsNextCancel = true } }

    func disarm() { state.withLock { $0.holdsNextCancel = false } }

    /// The bytes as ``TransportStream`` carries them: each read waits for a delivery.
    var bytes: AsyncThrowingStream<Data, any Error> {
        AsyncThrowingStream { [self] in try await self.next() }
    }

    var isReaderWaiting: Bool { state.withLock { $0.reader != nil } }

    private func next() async throws -> Data? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Data?, any Error>) in
                let done = state.withLock { state -> Bool in
                    if state.finished || state.cancelled { return true }
                    state.reader = continuation
                    return false
                }
                if done { continuation.resume(returning: nil) }
            }
        } onCancel: {
            cancelled()
        }
    }

    private func cancelled() {
        let holds = state.withLock { state -> Bool in
            state.cancelled = true
            defer { state.holdsNextCancel = false }
            return state.reader != nil && state.holdsNextCancel
        }
        closeOnServer()
        // A read cancelled while it waited may be held back, to hand over a
        // stale event later; otherwise it ends now.
        if holds {
            heldBack(self)
            return
        }
        let reader = state.withLock { state -> CheckedContinuation<Data?, any Error>? in
            defer { state.reader = nil }
            return state.reader
        }
        reader?.resume(returning: nil)
    }

    private func closeOnServer() {
        let close = state.withLock { state -> Bool in
            defer { state.closedOnServer = true }
            return !state.closedOnServer
        }
        if close { live.finished() }
    }

    /// Reads what the server's stream has now: its bytes, and whether it ended.
    func serverBytes() -> (bytes: Data, ended: Bool) {
        var collected = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let output = buffer.withUnsafeMutableBytes { raw in
                live.read(into: raw.baseAddress!, capacity: raw.count, park: {}, resume: {})
            }
            switch output {
            case .bytes(let count): collected.append(contentsOf: buffer[0..<count])
            case .parked: return (collected, false)
            case .end: return (collected, true)
            }
        }
    }

    /// Hands `bytes` to the waiting read; false when none waits.
    @discardableResult
    func deliver(_ bytes: Data) -> Bool {
        takeReader()?.resume(returning: bytes) != nil
    }

    /// Fails the waiting read (a connection reset); false when none waits.
    @discardableResult
    func fail(_ error: any Error) -> Bool {
        takeReader()?.resume(throwing: error) != nil
    }

    /// The stream is over: the waiting read, and every later one, ends.
    func finish() {
        let reader = state.withLock { state -> CheckedContinuation<Data?, any Error>? in
            state.finished = true
            defer { state.reader = nil }
            return state.reader
        }
        reader?.resume(returning: nil)
        closeOnServer()
    }

    private func takeReader() -> CheckedContinuation<Data?, any Error>? {
        state.withLock { state in
            defer { state.reader = nil }
            return state.reader
        }
    }
}
