import Foundation

/// One sync cycle as telemetry: the coarse network
/// state, what started the cycle and how it ended, with counts — enough to
/// tell "the API is failing for everyone" from ordinary network switches.
///
/// Never anything that identifies a network or a person's data: no SSID,
/// interface name or address, no record uuid, field or server message, no
/// token. A refusal carries the protocol's error code only.
public struct SyncTelemetryEvent: Sendable, Equatable, Codable {
    public enum Outcome: String, Sendable, Codable {
        case success
        case offline
        case noAnswer = "no_answer"
        case serverBusy = "server_busy"
        case signInRequired = "sign_in_required"
        case accessRevoked = "access_revoked"
        case refused
        case invalidAnswer = "invalid_answer"
        case localStorage = "local_storage"
        case timedOut = "timed_out"
        case credentialsUnavailable = "credentials_unavailable"
        case updateRequired = "update_required"
    }

    public var trigger: SyncTrigger
    public var outcome: Outcome
    /// The protocol error code of a refusal (e.g. `resync_required`).
    public var errorCode: String?
    /// The server's Retry-After, when it sent one.
    public var retryAfterSeconds: Int?
    public var networkBefore: ConnectivityState
    public var networkAfter: ConnectivityState
    /// The OS hint, coarse: whether a path exists, and whether it is metered.
    public var pathConnected: Bool?
    public var pathExpensive: Bool?
    public var durationMilliseconds: Int
    public var sent: Int
    public var confirmed: Int
    public var duplicates: Int
    public var conflicts: Int
    public var rejected: Int
    public var received: Int
    public var deleted: Int

    enum CodingKeys: String, CodingKey {
        case trigger, outcome, sent, confirmed, duplicates, conflicts, rejected, received, deleted
        case errorCode = "error_code"
        case retryAfterSeconds = "retry_after_s"
        case networkBefore = "network_before"
        case networkAfter = "network_after"
        case pathConnected = "path_connected"
        case pathExpensive = "path_expensive"
        case durationMilliseconds = "duration_ms"
    }

    init(
        _ report: SyncReport, networkBefore: ConnectivityState, connectivity: ConnectivityModel, duration: Duration
    ) {
        trigger = report.trigger
        (outcome, errorCode, retryAfterSeconds) = Self.outcome(report.failure)
        self.networkBefore = networkBefore
        networkAfter = connectivity.state
        pathConnected = connectivity.hint?.isConnected
        pathExpensive = connectivity.hint?.isExpensive
        durationMilliseconds = Int(duration / .milliseconds(1))
        sent = report.sent
        confirmed = report.confirmed
        duplicates = report.duplicates
        conflicts = report.conflicts.count
        rejected = report.rejected.count
        received = report.received
        deleted = report.deleted
    }

    private static func outcome(_ failure: SyncFailure?) -> (Outcome, String?, Int?) {
        switch failure {
        case nil: return (.success, nil, nil)
        case .offline: return (.offline, nil, nil)
        case .noAnswer: return (.noAnswer, nil, nil)
        case .serverBusy(let retryAfter): return (.serverBusy, nil, retryAfter)
        case .signInRequired: return (.signInRequired, nil, nil)
        case .accessRevoked: return (.accessRevoked, nil, nil)
        // The code is the protocol's vocabulary; the message may quote data.
        case .refused(let body): return (.refused, body.code.rawValue, nil)
        case .invalidAnswer: return (.invalidAnswer, nil, nil)
        case .localStorage: return (.localStorage, nil, nil)
        case .timedOut: return (.timedOut, nil, nil)
        case .credentialsUnavailable: return (.credentialsUnavailable, nil, nil)
        case .updateRequired: return (.updateRequired, ErrorCode.upgradeRequired.rawValue, nil)
        }
    }
}
