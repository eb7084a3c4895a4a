import Foundation
import OutpostCore

/// One waiting request (a long poll, or a stream between events), as the
/// hub and the HTTP layer share it.
///
/// The HTTP layer parks the connection (libmicrohttpd's suspend) only when
/// nothing is pending, under this object's lock, and whoever signals it
/// resumes it — so a commit that lands between "nothing to send" and the
/// suspension is never lost.
final class LiveConnection: Sendable {
    /// Why the connection was woken; several may be pending at once.
    struct Pending: Sendable, Equatable {
        var changes = false
        var heartbeat = false
        /// The long poll's wait ran out, or the stream reached its maximum duration.
        var deadline = false
        /// The server is closing the connection with this error (shutdown, revocation).
        var closing: APIError?

        var isEmpty: Bool { !changes && !heartbeat && !deadline && closing == nil }
    }

    private struct State {
        var pending = Pending()
        var resume: (@Sendable () -> Void)?
        var isParked = false
    }

    let id: UInt64
    let interest: LiveInterest
    /// The bearer token, checked again before every event: a revoked or
    /// expired token ends the stream.
    let token: String?
    /// When a long poll answers empty-handed, or a stream ends (monotonic nanoseconds).
    let deadline: UInt64
    private let state = Locked(State())

    init(id: UInt64, interest: LiveInterest, token: String?, deadline: UInt64, changesPending: Bool) {
        self.id = id
        self.interest = interest
        self.token = token
        self.deadline = deadline
        state.withLock { $0.pending.changes = changesPending }
    }

    /// Marks a reason to wake and resumes the connection if it is parked.
    func signal(_ update: (inout Pending) -> Void) {
        let resume = state.withLock { state -> (@Sendable () -> Void)? in
            update(&state.pending)
            guard state.isParked else { return nil }
            state.isParked = false
            return state.resume
        }
        resume?()
    }

    /// Parks the connection with `park` (which suspends it) unless a reason
    /// to wake is already pending; `resume` undoes the parking. Returns
    /// whether it parked.
    func parkUnlessPending(park: () -> Void, resume: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { state in
            guard state.pending.isEmpty else { return false }
            park()
            state.resume = resume
            state.isParked = true
            return true
        }
    }

    /// The pending reasons, cleared.
    func takePending() -> Pending {
        state.withLock { state in
            let pending = state.pending
            state.pending = Pending()
            return pending
        }
    }
}
