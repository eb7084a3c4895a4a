import Foundation
public import Outpost

/// Wraps a transport and injects the network's lies on request: no network,
/// requests lost on the way, answers lost after the server acted, slow or
/// held answers, error statuses. Every request is logged, so a test can
/// count exactly what reached the server.
public final class FaultInjectingTransport: SyncTransport, @unchecked Sendable {
    // @unchecked Sendable: `faults`, `offline`, `log` and `gates` are only touched while `lock` is held.
    public enum Fault: Sendable {
        /// Connection refused: the request never left.
        case notSent
        /// Lost on the way: the server never saw it, the device waited in vain.
        case dropRequest
        /// The server acted, then the answer was lost.
        case dropResponse
        /// The answer arrives late (checked against the request's timeout).
        case delay(Duration)
        /// The server answers this status with an error body (and Retry-After,
        /// when given), after `heldBy` opens when one is given.
        case status(Int, retryAfter: Int?, heldBy: Gate? = nil)
        /// The answer is held until the gate opens.
        case hold(Gate)
        /// The transport throws this error before sending (e.g. the task
        /// was cancelled, which URLSession reports in its own way).
        case fail(any Error & Sendable)
    }

    /// Holds answers until the test opens it.
    public final class Gate: @unchecked Sendable {
        // @unchecked Sendable: `waiters` and `isOpen` are only touched while `lock` is held.
        private let lock = NSLock()
        private var waiters: [CheckedContinuation<Void, Never>] = []
        private var isOpen = false
        private var arrivals = 0
        private var arrivalWaiters: [(Int, CheckedContinuation<Void, Never>)] = []

        public init() {}

        public func open() {
            lock.lock()
            isOpen = true
            let waiting = waiters
            waiters.removeAll()
            lock.unlock()
            waiting.forEach { $0.resume() }
        }

        func wait() async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                lock.lock()
                arrivals += 1
                let reached = arrivalWaiters.filter { $0.0 <= arrivals }
                arrivalWaiters.removeAll { $0.0 <= arrivals }
                if isOpen {
                    lock.unlock()
                    continuation.resume()
                } else {
                    waiters.append(continuation)
                    lock.unlock()
                }
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
                lock.lock()
                if arrivals >= count {
                    lock.unlock()
                    continuation.resume()
                } else {
                    arrivalWaiters.append((count, continuation))
                    lock.unlock()
                }
            }
        }
    }

    private let lock = NSLock()
    private let wrapped: any SyncTransport
    private var faults: [(fault: Fault, matches: @Sendable (TransportRequest) -> Bool)] = []
    private var offline = false
    private var log: [TransportRequest] = []
    private let clock: any MonotonicClock

    public init(wrapping transport: any SyncTransport, clock: any MonotonicClock = SystemMonotonicClock()) {
        wrapped = transport
        self.clock = clock
    }

    /// Every following request fails as "not sent" until set back.
    public var isOffline: Bool {
        get { lock.lock(); defer { lock.unlock() }; return offline }
        set { lock.lock(); offline = newValue; lock.unlock() }
    }

    /// Queues a fault for the next request matching the filter (default: any).
    public func inject(_ fault: Fault, when matches: @escaping @Sendable (TransportRequest) -> Bool = { _ in true }) {
        lock.lock()
        faults.append((fault, matches))
        lock.unlock()
    }

    /// Requests that reached the wrapped transport (the server), in order.
    public var delivered: [TransportRequest] {
        lock.lock()
        defer { lock.unlock() }
        return log
    }

    /// Delivered requests whose target starts with a path, e.g. `/v1/push`.
    public func delivered(to path: String) -> [TransportRequest] {
        delivered.filter { $0.target.hasPrefix(path) }
    }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        let (isOffline, fault) = lock.withLock { () -> (Bool, Fault?) in
            guard !offline else { return (true, nil) }
            guard let index = faults.firstIndex(where: { $0.matches(request) }) else { return (false, nil) }
            return (false, faults.remove(at: index).fault)
        }
        if isOffline { throw TransportError.notSent("offline (injected)") }
        switch fault {
        case .notSent?:
            throw TransportError.notSent("connection refused (injected)")
        case .fail(let error)?:
            throw error
        case .dropRequest?:
            throw TransportError.noAnswer("request lost (injected)")
        case .status(let status, let retryAfter, let gate)?:
            await gate?.wait()
            var headers: [String: String] = ["Content-Type": "application/json"]
            if let retryAfter { headers["Retry-After"] = String(retryAfter) }
            let body = #"{"error":{"code":"unavailable","message":"Injected failure."}}"#
            return TransportResponse(status: status, headers: headers, body: Data(body.utf8))
        default:
            break
        }
        lock.withLock { log.append(request) }
        let response = try await wrapped.send(request)
        switch fault {
        case .dropResponse?:
            throw TransportError.noAnswer("answer lost (injected)")
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
        return response
    }
}
