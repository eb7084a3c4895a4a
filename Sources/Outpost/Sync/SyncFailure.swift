public import OutpostCore

/// Why sync could not finish, typed so that no app ever matches error text.
public enum SyncFailure: Error, Sendable, Equatable {
    /// The request could not be sent: no network or server unreachable.
    case offline
    /// Sent, but no answer in time: changes are "checking result" and will
    /// be resent with the same seq.
    case noAnswer
    /// The server said "not now" (429, 503, 5xx).
    case serverBusy(retryAfter: Int?)
    /// The session expired or is unknown: capture goes on offline; sign in to send.
    case signInRequired
    /// This device's access was withdrawn.
    case accessRevoked
    /// The server refused the request itself (a bug or a version mismatch).
    case refused(ErrorBody)
    /// The answer could not be read, or broke the protocol.
    case invalidAnswer(String)
    /// The device's own storage failed (disk full, read-only, a damaged row):
    /// a local problem, never the server's; nothing already saved is lost.
    case localStorage(String)
    /// `sync(timeout:)` gave up waiting; sync goes on in the background.
    case timedOut
    /// The app's credentials provider could not give a token now (its
    /// sign-in service was unreachable): tried again later.
    case credentialsUnavailable(String)
    /// The server no longer accepts this version of the app
    /// (`426 upgrade_required`): captures are kept and sent after an update.
    case updateRequired

    /// Failures of a push that a pull right after would meet as well.
    var stopsThePull: Bool {
        switch self {
        case .offline, .noAnswer, .serverBusy, .timedOut, .signInRequired, .accessRevoked, .credentialsUnavailable,
            .updateRequired:
            return true
        case .refused, .invalidAnswer, .localStorage: return false
        }
    }

    /// "Not now" failures, retried with backoff without using the budget.
    public var isTransient: Bool {
        switch self {
        case .offline, .noAnswer, .serverBusy, .timedOut, .credentialsUnavailable: return true
        default: return false
        }
    }
}
