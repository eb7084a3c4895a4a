import OutpostCore

/// What one sync cycle did: the summary a person sees after pull-to-refresh.
public struct SyncReport: Sendable, Equatable {
    /// What started this cycle.
    public var trigger: SyncTrigger
    /// Changes sent (resends included).
    public var sent = 0
    /// Changes the server now holds.
    public var confirmed = 0
    /// Of those, ones the server had already applied (a lost answer).
    public var duplicates = 0
    /// Edits that lost to a newer server copy in this cycle, kept so the app can show them.
    public var conflicts: [ConflictReport] = []
    /// Changes the server refused for good in this cycle, with their field errors.
    public var rejected: [RejectedChange] = []
    /// Children held because a parent was refused.
    public var held: [HeldEntry] = []
    /// Records received and stored.
    public var received = 0
    /// Records deleted or removed by the pull.
    public var deleted = 0
    /// Server copies not applied because local changes are waiting.
    public var keptLocal = 0
    /// Why the cycle stopped early, if it did.
    public var failure: SyncFailure?

    /// Creates an empty report for a cycle started by `trigger`.
    public init(trigger: SyncTrigger) { self.trigger = trigger }

    mutating func add(_ settlement: PushSettlement) {
        confirmed += settlement.confirmed.count
        duplicates += settlement.duplicates
        conflicts += settlement.conflicts
        rejected += settlement.rejected
    }

    mutating func add(_ page: PullPageResult) {
        received += page.applied
        deleted += page.deleted + page.removed
        keptLocal += page.keptLocal
    }
}

/// Things the app should react to, one at a time.
public enum SyncEvent: Sendable, Equatable {
    /// The network came back after a real disconnection: registered
    /// refreshes run now, each after its own jittered delay.
    case freshSessionNeeded
    /// The session expired: ask the person to sign in; capture goes on.
    case signInRequired
    /// The device's access was withdrawn.
    case accessRevoked
    /// Edits that lost to a newer server copy.
    case conflicts([ConflictReport])
    /// Changes refused for good, with their field errors.
    case rejected([RejectedChange])
    /// A cycle ended.
    case cycleCompleted(SyncReport)
}
