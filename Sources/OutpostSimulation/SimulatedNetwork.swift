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

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A device's link to the server in the simulation: requests reach the real
/// server's request handling, or meet a fault chosen by the seeded random
/// stream. Requests "delayed" are held and delivered later, after newer
/// ones: the reordering a real network does.
public final class SimulatedNetwork: SyncTransport, @unchecked Sendable {
    // @unchecked Sendable: the simulation drives every device from one task,
    // one step at a time; `lock` guards the state all the same.
    private let lock = NSLock()
    let server: any SyncTransport
    private var random: SeededRandom
    /// Percent chance that a request meets some fault.
    public var faultRate: Int
    public var isPartitioned = false
    /// Set when a fault asks the device to crash once its cycle is over.
    public var crashRequested = false
    private var held: [TransportRequest] = []
    public private(set) var faults: [FaultKind: Int] = [:]
    public private(set) var requestCount = 0

    public init(server: any SyncTransport, seed: UInt64, faultRate: Int) {
        self.server = server
        self.random = SeededRandom(seed: seed)
        self.faultRate = faultRate
    }

    func count(_ kind: FaultKind) { lock.withLock { faults[kind, default: 0] += 1 } }

    private func roll(_ bound: UInt64) -> UInt64 { lock.withLock { random.next() % bound } }

    /// Delivers requests held back earlier (a late, reordered arrival).
    public func deliverHeld() async {
        let late = lock.withLock { () -> [TransportRequest] in
            defer { held.removeAll() }
            return held
        }
        for request in late { _ = try? await server.send(request) }
    }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        lock.withLock { requestCount += 1 }
        if lock.withLock({ isPartitioned }) { throw TransportError.notSent("partitioned") }
        guard roll(100) < UInt64(lock.withLock { faultRate }) else { return try await server.send(request) }
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
            lock.withLock { held.append(request) }
            throw TransportError.noAnswer("delayed past the timeout")
        case 4:
            count(.serverError)
            return Self.errorResponse(500, retryAfter: nil)
        case 5:
            count(.unavailable)
            return Self.errorResponse(503, retryAfter: Int(roll(5)))
        default:
            count(.crash)
            lock.withLock { crashRequested = true }
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
