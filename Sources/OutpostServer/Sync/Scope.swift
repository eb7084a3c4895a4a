import Foundation
import OutpostCore

/// Row-level scope (docs/protocol.md, "Users, roles, scope"), as SQL conditions on the
/// `records` table. Every read and every write goes through these.
struct Scope {
    let principal: Principal
    let config: ServerConfig

    /// Records the caller may read: their own (field), their team's
    /// (coordinator), all (admin), plus every read-only collection.
    func readable(_ arguments: inout [SQLValue]) -> String {
        let readOnly = config.readOnlyCollections
        var condition: String
        switch principal.role {
        case .admin: return "1 = 1"
        case .field:
            condition = "owner = ?"
            arguments.append(.text(principal.user))
        case .coordinator:
            condition = "team = ?"
            arguments.append(.text(principal.team))
        }
        if !readOnly.isEmpty {
            condition = "(\(condition) OR collection IN (\(readOnly.map { _ in "?" }.joined(separator: ", "))))"
            arguments.append(contentsOf: readOnly.map { .text($0) })
        }
        return condition
    }

    /// The same scope as separate conditions whose union is `readable`, each
    /// one an index range by itself (`owner, version`, `team, version`,
    /// `collection, version`). A pull walks each in version order and stops
    /// at its page size, instead of collecting the whole scope behind an OR
    /// and sorting it for every page.
    func readableBranches() -> [(condition: String, arguments: [SQLValue])] {
        let readOnly = config.readOnlyCollections
        var branches: [(String, [SQLValue])] = []
        switch principal.role {
        case .admin: return [("1 = 1", [])]
        case .field: branches.append(("owner = ?", [.text(principal.user)]))
        case .coordinator: branches.append(("team = ?", [.text(principal.team)]))
        }
        for collection in readOnly { branches.append(("collection = ?", [.text(collection)])) }
        return branches
    }

    /// The same scope as conditions that share no record, each one an index
    /// range by itself, with the configured collections each can hold: a
    /// count adds up what each finds. (`readable` joins them with OR, which
    /// SQLite answers by collecting row ids from both indexes and reading
    /// every row; the pull's branches may overlap, since it merges by version.)
    func disjointBranches() -> [(condition: String, arguments: [SQLValue], collections: [String])] {
        let readOnly = config.readOnlyCollections
        let writable = config.collections.values.filter { !$0.readOnly }.map(\.name).sorted()
        let others = readOnly.isEmpty ? "" : " AND collection NOT IN (\(readOnly.map { _ in "?" }.joined(separator: ", ")))"
        var branches: [(String, [SQLValue], [String])] = []
        switch principal.role {
        case .admin: return (writable + readOnly).map { ("collection = ?", [.text($0)], [$0]) }
        case .field: branches.append(("owner = ?" + others, [.text(principal.user)] + readOnly.map { .text($0) }, writable))
        case .coordinator: branches.append(("team = ?" + others, [.text(principal.team)] + readOnly.map { .text($0) }, writable))
        }
        for collection in readOnly { branches.append(("collection = ?", [.text(collection)], [collection])) }
        return branches
    }

    /// Whether the caller may read this record.
    func canRead(_ record: ServerRecord) -> Bool {
        if config.collections[record.collection]?.readOnly == true { return true }
        return owns(owner: record.owner, team: record.team)
    }

    /// Whether the record is in the caller's own scope (not counting read-only data).
    func owns(owner: String, team: String) -> Bool {
        switch principal.role {
        case .admin: return true
        case .field: return owner == principal.user
        case .coordinator: return team == principal.team
        }
    }

    /// Records that left the caller's scope: exits from the old owner or team.
    func exited(_ arguments: inout [SQLValue]) -> String? {
        switch principal.role {
        case .admin: return nil
        case .field:
            arguments.append(.text(principal.user))
            return "old_owner = ?"
        case .coordinator:
            arguments.append(.text(principal.team))
            return "old_team = ?"
        }
    }

    /// Callers with equal keys read exactly the same feed: one user's own
    /// records, one team's, or everything. (The cursor's tag also names the
    /// user, so it cannot serve for this.)
    var sharingKey: String {
        switch principal.role {
        case .admin: return "admin"
        case .field: return "field:" + principal.user
        case .coordinator: return "team:" + principal.team
        }
    }

    /// A short tag of what the caller can see, carried in pull cursors: a
    /// cursor made for another scope (a new team) must re-download.
    var tag: String {
        String(SHA256.hex(of: "\(principal.role.rawValue)|\(principal.team)|\(principal.user)".utf8).prefix(12))
    }
}
