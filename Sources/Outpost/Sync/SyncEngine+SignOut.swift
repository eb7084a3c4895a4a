import Foundation

/// What signing out does with changes the server has not confirmed.
public enum UnsentChangesPolicy: Sendable, Equatable {
    /// Keep the database (and its outbox) for the next sign-in on this device.
    case keep
    /// Wipe the database even though changes are unsent.
    case discard
    /// Refuse to sign out while anything is unsent; wipe otherwise.
    case refuse
}

/// Signing out was refused.
public enum SignOutError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Changes would be lost; the count says how many.
    case unsentChanges(Int)

    public var description: String {
        switch self {
        case .unsentChanges(let count):
            return count == 1
                ? "1 change has not reached the server yet; signing out now would lose it."
                : "\(count) changes have not reached the server yet; signing out now would lose them."
        }
    }
}

extension SyncEngine {
    /// Signs out: stops syncing, forgets the token and, unless told to keep
    /// it, wipes the store (``LocalStore/wipe()``). Never an implicit
    /// choice that loses data: the caller says what happens to unsent
    /// changes.
    ///
    /// The store stays open and the engine stays usable: the app's handles
    /// show an empty store, and after the next sign-in (``updateToken(_:)``,
    /// or ``start()`` with a credentials provider) the engine downloads the
    /// person's data under a new client id.
    public func signOut(unsentChanges policy: UnsentChangesPolicy) async throws {
        let summary = try await store.outboxSummary()
        let unsent = summary.total + summary.held + summary.rejected
        if policy == .refuse && unsent > 0 { throw SignOutError.unsentChanges(unsent) }
        stop()
        credentials.forget()
        if policy != .keep {
            try await store.wipe()
            // What the status said about the last person's data is gone with it.
            statusPublisher.send(.wiped)
            scopeTotals = [:]
            liveChannel.wiped()
            waiters.forgetLastReport()
        }
        statusPublisher.send(.signInRequired(true))
        await publishStatus()
    }
}
