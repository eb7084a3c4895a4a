import Foundation
public import Outpost
import OutpostCore

/// Wraps a transport and injects the network's lies on request: no network,
/// requests lost on the way, answers lost after the server acted, slow or
/// held answers, error statuses. Every request is logged, so a test can
/// count exactly what reached the server.
public final class FaultInjectingTransport: SyncTransport, Sendable {
    public enum Fault: Sendable {
        /// Connection refused: the request never left.
        case notSent
        /// Lost on the way: the server never saw it, the device waited in vain.
        case dropRequest
        /// The server acted, then the answer was lost.
        case dropResponse
        /// The server acted and answered 200, but the body arrived cut short
        /// (a proxy or a dying connection that truncates what it relays).
        case truncateResponse
        /// The server acted, its answer's head arrived (the caller heard its
        /// status), then the connection died before the body, noticed once
        /// a request sent on the head got through (or after a second).
        case cutAfterHead
        /// The answer arrives late (checked against the request's timeout).
        case delay(Duration)
        /// The server answers this status with an error body (and Retry-After,
        /// when given), after `heldBy` opens when one is given.
        case status(Int, retryAfter: Int?, heldBy: Gate? = nil)
        /// The answer is held until the gate opens.
        case hold(Gate)
        /// The request's body is still going out until the gate opens (a
        /// slow upload): the server gets the request, and the caller hears
        /// that its body went, only then.
        case slowBody(Gate)
        /// The transport throws this error before sending (e.g. the task
        /// was cancelled, which URLSession reports in its own way).
        case fail(any Error & Sendable)
    }

    /// Holds answers until the test opens it.
    public final class Gate: Sendable {
        /// Answers held until the gate opens, how many answers reached it,
        /// and tests waiting for a number of arrivals.
        private struct State {
            var waiters: [CheckedContinuation<Void, Never>] = []
            var isOpen = false
            var arrivals = 0
            var arrivalWaiters: [(Int, CheckedContinuation<Void, Never>)] = []
        }

        private let state = Locked(State())

        public init() {}

        public func open() {
            let waiting = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.isOpen = true
                let waiting = state.waiters
                state.waiters.removeAll()
                return waiting
            }
            waiting.forEach { $0.resume() }
        }

        func wait() async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // Decided under the lock, resumed after it: a resumed task may call back in.
                let (isOpen, reached) = state.withLock { state -> (Bool, [(Int, CheckedContinuation<Void, Never>)]) in
                    state.arrivals += 1
                    let arrivals = state.arrivals
                    let reached = state.arrivalWaiters.filter { $0.0 <= arrivals }
                    state.arrivalWaiters.removeAll { $0.0 <= arrivals }
                    if !state.isOpen { state.waiters.append(continuation) }
                    return (state.isOpen, reached)
                }
                if isOpen { continuation.resume() }
                reached.forEach { $0.1.resume() }
            }
        }

        /// Suspends until `count` answers are being held (or were held); fails
        /// after `timeout`, so a request that never comes fails its test.
        public func waitForArrivals(_ count: Int = 1, within timeout: Duration = .seconds(30)) async throws {
            try await awaitBounded("\(count) held answer(s) arrived at the gate", within: timeout) {
                await self.arrivalsReached(count)
            }
        }

        private func arrivalsReached(_ count: Int) async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let reached = state.withLock { state -> Bool in
                    if state.arrivals >= count { return true }
                    state.arrivalWaiters.append((count, continuation))
                    return false
                }
                if reached { continuation.resume() }
            }
        }
    }

    /// The faults queued, the offline switch, and the requests that got through.
    private struct State {
        var faults: [(fault: Fault, matches: @Sendable (TransportRequest) -> Bool)] = []
        var offline = false
        var log: [TransportRequest] = []
    }

    private let state = Locked(State())
    private let wrapped: any SyncTransport
    private let clock: any MonotonicClock

    public init(wrapping transport: any SyncTransport, clock: any MonotonicClock = SystemMonotonicClock()) {
        wrapped = transport
        self.clock = clock
    }

    /// Every following request fails as "not sent" until set back.
    public var isOffline: Bool {
        get { state.withLock { $0.offline } }
        set { state.withLock { $0.offline = newValue } }
    }

    /// Queues a fault for the next request matching the filter (default: any).
    public func inject(_ fault: Fault, when matches: @escaping @Sendable (TransportRequest) -> Bool = { _ in true }) {
        state.withLock { $0.faults.append((fault, matches)) }
    }

    /// Requests that reached the wrapped transport (the server), in order.
    public var delivered: [TransportRequest] {
        state.withLock { $0.log }
    }

    /// Delivered requests whose target starts with a path, e.g. `/v1/push`.
    public func delivered(to path: String) -> [TransportRequest] {
        delivered.filter { $0.target.hasPrefix(path) }
    }

    /// Streams pass to the wrapped transport, unless the device is offline.
    public func openStream(_ request: TransportRequest) async throws -> TransportStream {
        if state.withLock({ $0.offline }) { throw TransportError.notSent("offline (injected)") }
        state.withLock { $0.log.append(request) }
        return try await wrapped.openStream(request)
    }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        try await send(request, progress: { _ in })
    }

    public func send(_ request: TransportRequest, progress: @escaping @Sendable (RequestProgress) -> Void) async throws
        -> TransportResponse
    {
        let (isOffline, fault) = state.withLock { state -> (Bool, Fault?) in
            guard !state.offline else { return (true, nil) }
            guard let index = state.faults.firstIndex(where: { $0.matches(request) }) else { return (false, nil) }
            return (false, state.faults.remove(at: index).fault)
        }
        if isOffline { throw TransportError.notSent("offline (injected)") }
        switch fault {
        case .notSent?:
            throw TransportError.notSent("connection refused (injected)")
        case .fail(let error)?:
            throw error
        default:
            break
        }
        if case .slowBody(let gate)? = fault { await gate.wait() }
        progress(.bodySent)
        switch fault {
        case .dropRequest?:
            throw TransportError.noAnswer("request lost (injected)")
        case .status(let status, let retryAfter, let gate)?:
            await gate?.wait()
            var headers: [String: String] = ["Content-Type": "application/json"]
            if let retryAfter { headers["Retry-After"] = String(retryAfter) }
            let body = #"{"error":{"code":"unavailable","message":"Injected failure."}}"#
            progress(.head(status))
            return TransportResponse(status: status, headers: headers, body: Data(body.utf8))
        default:
            break
        }
        state.withLock { $0.log.append(request) }
        let response = try await wrapped.send(request)
        switch fault {
        case .dropResponse?:
            throw TransportError.noAnswer("answer lost (injected)")
        case .cutAfterHead?:
            let before = state.withLock { $0.log.count }
            progress(.head(response.status))
            // The connection is found dead some time after the head: by
            // then a request the caller sent on the head has got through
            // (waited for, up to a second, so that a test sees it every time).
            for _ in 0..<1000 where state.withLock({ $0.log.count }) == before {
                try? await Task.sleep(for: .milliseconds(1))
            }
            throw TransportError.noAnswer("connection lost after the answer's head (injected)")
        case .truncateResponse?:
            return TransportResponse(
                status: response.status, headers: response.headers, body: response.body.prefix(response.body.count / 2))
        case .delay(let duration)?:
            if duration > .seconds(request.timeout) {
                try? await clock.sleep(for: .seconds(request.timeout))
                throw TransportError.noAnswer("timed out (injected)")
            }
            try? await clock.sleep(for: duration)
        case .hold(let gate)?:
            await gate.wait()
        default:
            break
        }
        progress(.head(response.status))
        return response
    }
}
