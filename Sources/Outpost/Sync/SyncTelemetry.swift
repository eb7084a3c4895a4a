import Foundation

/// One sync cycle as telemetry: the coarse network
/// state, what started the cycle and how it ended, with counts — enough to
/// tell "the API is failing for everyone" from ordinary network switches.
///
/// Never anything that identifies a network or a person's data: no SSID,
/// interface name or address, no record uuid, field or server message, no
/// token. A refusal carries the protocol's error code only.
public struct SyncTelemetryEvent: Sendable, Equatable, Codable {
    /// How the cycle ended: success, or the kind of `SyncFailure` that stopped it.
    public enum Outcome: String, Sendable, Codable {
        /// The cycle completed.
        case success
        /// The request could not be sent: no network or server unreachable.
        case offline
        /// Sent, but no answer came in time.
        case noAnswer = "no_answer"
        /// The server said "not now" (429 or 5xx); see `retryAfterSeconds`.
        case serverBusy = "server_busy"
        /// The session expired or was unknown.
        case signInRequired = "sign_in_required"
        /// This device's access was withdrawn.
        case accessRevoked = "access_revoked"
        /// The server refused the request itself; see `errorCode`.
        case refused
        /// The answer could not be read or broke the protocol.
        case invalidAnswer = "invalid_answer"
        /// The device's own storage failed.
        case localStorage = "local_storage"
        /// `sync(timeout:)` stopped waiting before the cycle ended.
        case timedOut = "timed_out"
        /// The app's credentials provider could not give a token.
        case credentialsUnavailable = "credentials_unavailable"
        /// The server no longer accepts this version of the app.
        case updateRequired = "update_required"
    }

    /// What started the cycle.
    public var trigger: SyncTrigger
    /// How the cycle ended.
    public var outcome: Outcome
    /// The protocol error code of a refusal (e.g. `resync_required`).
    public var errorCode: String?
    /// The server's Retry-After, when it sent one.
    public var retryAfterSeconds: Int?
    /// The connectivity state when the cycle started.
    public var networkBefore: ConnectivityState
    /// The connectivity state when the cycle ended.
    public var networkAfter: ConnectivityState
    /// The OS hint, coarse: whether a path exists, and whether it is metered.
    public var pathConnected: Bool?
    /// Whether the path is metered (mobile data); nil without an OS hint.
    public var pathExpensive: Bool?
    /// How long the cycle took, in milliseconds.
    public var durationMilliseconds: Int
    /// Changes sent (resends included).
    public var sent: Int
    /// Changes the server now holds.
    public var confirmed: Int
    /// Of those, ones the server had already applied.
    public var duplicates: Int
    /// Edits that lost to a newer server copy.
    public var conflicts: Int
    /// Changes the server refused for good.
    public var rejected: Int
    /// Records received and stored.
    public var received: Int
    /// Records deleted or removed by the pull.
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
