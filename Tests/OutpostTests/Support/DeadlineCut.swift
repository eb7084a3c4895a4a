import Foundation
import Outpost
import OutpostCore
import OutpostTesting

/// A network on which a background sync's deadline arrives at a chosen
/// request: the manual clock moves to the deadline as the request goes,
/// and the request never ends until the engine cancels it (as iOS's time
/// running out finds a request on the wire). Every other request passes.
final class DeadlineCut: SyncTransport, Sendable {
    struct Plan: Sendable {
        /// Where the clock moves as the request goes; nil leaves it to the test.
        var deadline: Duration?
        /// The server gets the request and acts on it (its answer is lost);
        /// otherwise it never hears of it.
        var serverActs: Bool
        var matches: @Sendable (TransportRequest) -> Bool
    }

    let network: FaultInjectingTransport
    private let clock: ManualMonotonicClock
    private let plan = Locked<Plan?>(nil)
    /// The request the deadline cut, once it came.
    private let cutRequest = Locked<TransportRequest?>(nil)

    init(_ network: FaultInjectingTransport, clock: ManualMonotonicClock) {
        self.network = network
        self.clock = clock
    }

    /// The next request matching `matches` is where the deadline arrives.
    func cut(at deadline: Duration?, serverActs: Bool, when matches: @escaping @Sendable (TransportRequest) -> Bool) {
        plan.withLock { $0 = Plan(deadline: deadline, serverActs: serverActs, matches: matches) }
    }

    /// The request that was on the wire at the deadline.
    var cut: TransportRequest? { cutRequest.current }

    func openStream(_ request: TransportRequest) async throws -> TransportStream {
        try await network.openStream(request)
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        try await send(request, progress: { _ in })
    }

    func send(_ request: TransportRequest, progress: @escaping @Sendable (RequestProgress) -> Void) async throws
        -> TransportResponse
    {
        let due = plan.withLock { plan -> Plan? in
            guard let due = plan, due.matches(request) else { return nil }
            plan = nil
            return due
        }
        guard let due else { return try await network.send(request, progress: progress) }
        cutRequest.withLock { $0 = request }
        if due.serverActs { _ = try await network.send(request) }
        progress(.bodySent)
        if let deadline = due.deadline { clock.advance(by: deadline - clock.now()) }
        do {
            try await Task.sleep(for: .seconds(60))
        } catch {
            throw TransportError.cancelled
        }
        throw TransportError.noAnswer("the engine did not cancel \(request.method) \(request.target) at its deadline within 60 s")
    }
}
