import Foundation

/// Who a waiting connection serves and which of their collections it
/// follows: what decides whether a commit wakes it.
struct LiveInterest: Sendable {
    let principal: Principal
    let collections: Set<String>
    /// Collections everyone reads (reference data): any write to one wakes
    /// every connection that follows it.
    let readOnly: Set<String>
    /// The device (its client id, from `Outpost-Device`), when it said:
    /// the console shows which devices are live now.
    var device: String? = nil

    /// Whether the commit may change what this connection's pull returns.
    /// Never false for a commit that does; a spurious wake costs one empty
    /// pull.
    func isTouched(by notice: CommitNotice) -> Bool {
        isTouched(by: notice, referenceWritten: readOnly.intersection(notice.collections))
    }

    /// The same, with the reference collections the commit wrote worked
    /// out once for every connection a commit may wake (they all follow
    /// the same reference collections), not once each.
    func isTouched(by notice: CommitNotice, referenceWritten: Set<String>) -> Bool {
        if notice.wakesAll { return true }
        guard !collections.isDisjoint(with: notice.collections) else { return false }
        if !referenceWritten.isEmpty && !collections.isDisjoint(with: referenceWritten) { return true }
        switch principal.role {
        case .admin: return true
        case .field: return notice.owners.contains(principal.user)
        case .coordinator: return notice.teams.contains(principal.team)
        }
    }
}
