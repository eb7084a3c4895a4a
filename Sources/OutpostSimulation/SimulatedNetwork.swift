import Foundation
public import Outpost
import OutpostCore

/// The faults the simulated network injects, by kind.
public enum FaultKind: String, Sendable, CaseIterable, Comparable {
    /// Not a fault of the network: the company's backend wrote to the app's
    /// own table between the devices' steps (`--own-tables`), counted here
    /// with what else happened to the run.
    case backendWrite = "backend_write"
    case requestDropped = "request_dropped"
    case responseDropped = "response_dropped"
    /// The server acts and answers, but the answer's body arrives cut short.
    case responseTruncated = "response_truncated"
    /// The server acts and answers; the answer's head arrives, then the
    /// connection dies before its body (a push's next push is then out).
    case responseCutAfterHead = "response_cut_after_head"
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
    /// The disk fails every sync for a while: the WAL's copies into the
    /// database file (checkpoints) fail; commits, which do not sync, go on.
    case syncsFail = "syncs_fail"
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
    /// The device's power goes at some write or sync (of a sync, or right
    /// after it): it starts again on what its disk had synced.
    case devicePowerLoss = "device_power_loss"
    /// The server's power goes at some write or sync of its database or
    /// blob files while a device syncs (or right after): it starts again on
    /// what its disk had synced, every live stream reset.
    case serverPowerLoss = "server_power_loss"
    /// A live stream's socket stays open and passes nothing.
    case liveStall = "live_stall"
    /// A live stream's connection is reset mid-way.
    case liveCut = "live_cut"
    /// A stream open (or long poll) gets no answer, or a 503.
    case liveOpenFailed = "live_open_failed"
    /// A stream open meets a server too busy to answer anyone (a
    /// reconnect storm): no headers in time, and no answer to the plain
    /// pull that asks why either. The device tries the stream again after
    /// a backoff; it must not take the server for a buffering proxy.
    case liveOpenBusy = "live_open_busy"
    /// An event delivered before is delivered again on a newer stream.
    case liveLateDuplicate = "live_late_duplicate"
    /// A replaced channel's read hands over an event after the snapshot
    /// that replaced it.
    case liveStaleGeneration = "live_stale_generation"
    /// An attachment upload's connection is cut mid-body: the server keeps
    /// what arrived, the device hears nothing.
    case uploadCut = "upload_cut"
    /// An attachment upload reaches the server twice.
    case uploadDuplicated = "upload_duplicated"
    /// An attachment upload is held back and reaches the server after newer ones.
    case uploadReordered = "upload_reordered"

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
        /// Requests still to go unanswered by a server too busy for them.
        var busyRequests = 0
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

    func roll(_ bound: UInt64) -> UInt64 { state.withLock { $0.random.next() % bound } }

    /// The next request (not the live channel's) gets no answer.
    func makeNextRequestBusy() { state.withLock { $0.busyRequests += 1 } }

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
        try await send(request, progress: { _ in })
    }

    public func send(_ request: TransportRequest, progress: @escaping @Sendable (RequestProgress) -> Void) async throws
        -> TransportResponse
    {
        let answer = try await deliver(request, progress: progress)
        progress(.head(answer.status))
        return answer
    }

    /// `progress` is told the body went out once the request leaves the
    /// device (past a partition), and a head where a fault delivers one alone.
    private func deliver(_ request: TransportRequest, progress: @Sendable (RequestProgress) -> Void) async throws
        -> TransportResponse
    {
        // A long poll is the live channel's: it waits for the simulation too.
        if request.target.contains("&wait=") { return try await live.poll(request) }
        state.withLock { $0.requestCount += 1 }
        if isPartitioned { throw TransportError.notSent("partitioned") }
        progress(.bodySent)
        let busy = state.withLock { state in
            defer { state.busyRequests = max(0, state.busyRequests - 1) }
            return state.busyRequests > 0
        }
        if busy { throw TransportError.noAnswer("the server was too busy to answer in time") }
        // Uploads are few and long: they meet faults three times as often.
        let isUpload = request.method == "PUT" && request.target.hasPrefix("/v1/blobs/")
        guard roll(100) < UInt64(min(100, faultRate * (isUpload ? 3 : 1))) else { return try await server.send(request) }
        if isUpload { return try await uploadFault(request) }
        switch roll(9) {
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
        case 6:
            count(.responseTruncated)
            let answer = try await server.send(request)
            let kept = Int(roll(UInt64(max(1, answer.body.count))))
            return TransportResponse(status: answer.status, headers: answer.headers, body: answer.body.prefix(kept))
        case 7:
            count(.responseCutAfterHead)
            progress(.head(try await server.send(request).status))
            throw TransportError.noAnswer("the connection died after the answer's head")
        default:
            count(.crash)
            state.withLock { $0.crashRequested = true }
            _ = try await server.send(request)
            throw TransportError.noAnswer("the device died before the answer")
        }
    }

    /// What a bad network does to an attachment upload.
    private func uploadFault(_ request: TransportRequest) async throws -> TransportResponse {
        switch roll(5) {
        case 0:
            count(.uploadCut)
            // The first bytes of the body arrive, then the connection is gone.
            if let cut = Self.cut(request, keeping: { self.roll(UInt64($0)) }) { _ = try? await server.send(cut) }
            throw TransportError.noAnswer("upload cut mid-body")
        case 1:
            count(.uploadDuplicated)
            _ = try await server.send(request)
            return try await server.send(request)
        case 2:
            count(.uploadReordered)
            state.withLock { $0.held.append(request) }
            throw TransportError.noAnswer("upload delayed past the timeout")
        case 3:
            count(.responseDropped)
            _ = try await server.send(request)
            throw TransportError.noAnswer("response dropped after the server stored the piece")
        default:
            count(.unavailable)
            return Self.errorResponse(503, retryAfter: Int(roll(3)))
        }
    }

    /// The request as the server sees it when the connection dies after
    /// some of its body: a shorter range of the same bytes (the server
    /// stores what arrived). Nil when fewer than two bytes were to be sent.
    static func cut(_ request: TransportRequest, keeping: (Int) -> UInt64) -> TransportRequest? {
        guard let body = request.body, body.count > 1, let range = request.headers["Content-Range"],
            range.hasPrefix("bytes "), let slash = range.firstIndex(of: "/"), let dash = range.firstIndex(of: "-"),
            let first = Int64(range[range.index(range.startIndex, offsetBy: 6)..<dash])
        else { return nil }
        let kept = 1 + Int(keeping(body.count - 1))
        var cut = request
        cut.body = body.prefix(kept)
        cut.headers["Content-Range"] = "bytes \(first)-\(first + Int64(kept) - 1)\(range[slash...])"
        return cut
    }

    static func errorResponse(_ status: Int, retryAfter: Int?) -> TransportResponse {
        var headers = ["Content-Type": "application/json"]
        if let retryAfter { headers["Retry-After"] = String(retryAfter) }
        let body = #"{"error":{"code":"unavailable","message":"Injected by the simulation."}}"#
        return TransportResponse(status: status, headers: headers, body: Data(body.utf8))
    }
}
