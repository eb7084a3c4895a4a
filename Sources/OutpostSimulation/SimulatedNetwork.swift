import Foundation
public import Outpost
import OutpostCore

/// The faults the simulated network injects, by kind.
public enum FaultKind: String, Sendable, CaseIterable, Comparable {
    case requestDropped = "request_dropped"
    case responseDropped = "response_dropped"
    case duplicatedDelivery = "duplicated_delivery"
    case delayedDelivery = "delayed_delivery"
    case serverError = "server_error"
    case unavailable = "unavailable_retry_after"
    case partition
    case crash
    case clockSkew = "clock_skew"
    case tokenExpiry = "token_expiry"
    /// The device is restored from an older backup of its database.
    case restoredBackup = "restored_backup"
    /// The device's database is copied to a second device; both capture.
    case clonedDevice = "cloned_device"
    /// The disk fills up for a while: every write fails until space is freed.
    case diskFull = "disk_full"
    /// One write fails at some step of a later local transaction.
    case ioError = "io_error"
    /// A queued change is damaged on disk.
    case damagedRow = "damaged_row"
    /// A capture too large for the server's body limit, alone or in a batch.
    case oversizedMutation = "oversized_mutation"
    /// A capture nested deeper than the server reads.
    case malformedMutation = "malformed_mutation"
    /// Another server process froze mid-transaction holding the write lock
    /// (then died, its transaction rolled back) while this device synced.
    case serverFrozen = "server_frozen"
    /// A live stream's socket stays open and passes nothing.
    case liveStall = "live_stall"
    /// A live stream's connection is reset mid-way.
    case liveCut = "live_cut"
    /// A stream open (or long poll) gets no answer, or a 503.
    case liveOpenFailed = "live_open_failed"
    /// An event delivered before is delivered again on a newer stream.
    case liveLateDuplicate = "live_late_duplicate"
    /// A replaced channel's read hands over an event after the snapshot
    /// that replaced it.
    case liveStaleGeneration = "live_stale_generation"

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A device's link to the server in the simulation: requests reach the real
/// server's request handling, or meet a fault chosen by the seeded random
/// stream. Requests "delayed" are held and delivered later, after newer
/// ones: the reordering a real network does.
public final class SimulatedNetwork: SyncTransport, Sendable {
    // The simulation drives every device from one task, one step at a time;
    // the state sits in a `Locked` all the same, so any thread may touch it.
    private struct State {
        var random: SeededRandom
        var faultRate: Int
        var isPartitioned = false
        var crashRequested = false
        var held: [TransportRequest] = []
        var faults: [FaultKind: Int] = [:]
        var requestCount = 0
    }

    private let state: Locked<State>
    let server: ServerTransport
    /// The live channel: streams and long polls wait here for the simulation.
    public let live = SimulatedLiveLine()

    /// Percent chance that a request meets some fault.
    public var faultRate: Int {
        get { state.withLock { $0.faultRate } }
        set { state.withLock { $0.faultRate = newValue } }
    }

    public var isPartitioned: Bool {
        get { state.withLock { $0.isPartitioned } }
        set { state.withLock { $0.isPartitioned = newValue } }
    }

    /// Set when a fault asks the device to crash once its cycle is over.
    public var crashRequested: Bool {
        get { state.withLock { $0.crashRequested } }
        set { state.withLock { $0.crashRequested = newValue } }
    }

    public var faults: [FaultKind: Int] { state.withLock { $0.faults } }
    public var requestCount: Int { state.withLock { $0.requestCount } }

    public init(server: ServerTransport, seed: UInt64, faultRate: Int) {
        self.server = server
        self.state = Locked(State(random: SeededRandom(seed: seed), faultRate: faultRate))
    }

    func count(_ kind: FaultKind) { state.withLock { $0.faults[kind, default: 0] += 1 } }

    private func roll(_ bound: UInt64) -> UInt64 { state.withLock { $0.random.next() % bound } }

    /// Delivers requests held back earlier (a late, reordered arrival).
    public func deliverHeld() async {
        let late = state.withLock { state -> [TransportRequest] in
            defer { state.held.removeAll() }
            return state.held
        }
        for request in late { _ = try? await server.send(request) }
    }

    /// A stream waits in ``live`` until the simulation answers it.
    public func openStream(_ request: TransportRequest) async throws -> TransportStream {
        try await live.open(request)
    }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        // A long poll is the live channel's: it waits for the simulation too.
        if request.target.contains("&wait=") { return try await live.poll(request) }
        state.withLock { $0.requestCount += 1 }
        if isPartitioned { throw TransportError.notSent("partitioned") }
        guard roll(100) < UInt64(faultRate) else { return try await server.send(request) }
        switch roll(7) {
        case 0:
            count(.requestDropped)
            throw TransportError.noAnswer("request dropped")
        case 1:
            count(.responseDropped)
            _ = try await server.send(request)
            throw TransportError.noAnswer("response dropped after the server acted")
        case 2:
            count(.duplicatedDelivery)
            _ = try await server.send(request)
            return try await server.send(request)
        case 3:
            count(.delayedDelivery)
            state.withLock { $0.held.append(request) }
            throw TransportError.noAnswer("delayed past the timeout")
        case 4:
            count(.serverError)
            return Self.errorResponse(500, retryAfter: nil)
        case 5:
            count(.unavailable)
            return Self.errorResponse(503, retryAfter: Int(roll(5)))
        default:
            count(.crash)
            state.withLock { $0.crashRequested = true }
            _ = try await server.send(request)
            throw TransportError.noAnswer("the device died before the answer")
        }
    }

    static func errorResponse(_ status: Int, retryAfter: Int?) -> TransportResponse {
        var headers = ["Content-Type": "application/json"]
        if let retryAfter { headers["Retry-After"] = String(retryAfter) }
        let body = #"{"error":{"code":"unavailable","message":"Injected by the simulation."}}"#
        return TransportResponse(status: status, headers: headers, body: Data(body.utf8))
    }
}
