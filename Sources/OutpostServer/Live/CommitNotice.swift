import Foundation

/// What one committed write touched, as much as a waiting connection needs
/// to know whether the commit may concern it: the collections, and every
/// owner and team a record had before or after (a record leaving a scope
/// wakes the scope it left, which then receives `removed`).
struct CommitNotice: Sendable, Equatable {
    var collections: Set<String> = []
    var owners: Set<String> = []
    var teams: Set<String> = []
    /// Everything may have changed (a listener's gap, a commit too large to
    /// describe): every connection is woken.
    var wakesAll = false

    var isEmpty: Bool { collections.isEmpty && !wakesAll }

    /// Adds one record's write.
    mutating func add(collection: String, owner: String, team: String) {
        collections.insert(collection)
        owners.insert(owner)
        teams.insert(team)
    }
}
