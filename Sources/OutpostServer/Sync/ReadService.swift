import Foundation
import OutpostCore

/// The read endpoints: scope, one record, search, a mutation's stored result.
struct ReadService {
    let database: any ServerDatabase
    let config: ServerConfig

    /// `GET /v1/scope`: what the caller can see, so the client picks its
    /// mode. With `window_start`, counts only records a capped download of
    /// that window would fetch (exact progress for it).
    func scope(of principal: Principal, windowStart: String? = nil) throws -> ScopeResponse {
        let scope = Scope(principal: principal, config: config)
        var window: String?
        if let windowStart {
            guard let date = ServerTimestamp(rawValue: windowStart).date else {
                throw APIError(
                    .invalidRequest, "The window start is not a valid time.",
                    fields: ["window_start": "must be an RFC 3339 time such as 2026-01-01T00:00:00Z"])
            }
            window = ServerTimestamp(date).rawValue
        }
        // Each branch is counted from its index alone (the scope indexes
        // hold the collection and the deleted flag), in one pass and one
        // snapshot: a column per collection, not GROUP BY, which sorted
        // every row it counted.
        var byName: [String: Int64] = [:]
        try database.read { sql in
            for branch in scope.disjointBranches() where !branch.collections.isEmpty {
                var arguments = branch.collections.map { SQLValue.text($0) } + branch.arguments
                var condition = branch.condition
                if let window {
                    condition += " AND (window_at IS NULL OR window_at >= ?)"
                    arguments.append(.text(window))
                }
                guard let row = try sql.first(Self.countQuery(branch.collections.count, where: condition), arguments) else { continue }
                for (index, name) in branch.collections.enumerated() { byName[name, default: 0] += row.int(index) }
            }
        }
        var collections: [String: CollectionScope] = [:]
        for schema in config.collections.values {
            collections[schema.name] = CollectionScope(
                count: byName[schema.name] ?? 0, windowField: schema.windowField, readOnly: schema.readOnly)
        }
        return ScopeResponse(user: principal.user, role: principal.role, team: principal.team, collections: collections)
    }

    /// Live records of one scope branch, a column per collection (each
    /// collection's name is bound before the branch's own arguments).
    static func countQuery(_ collections: Int, where condition: String) -> String {
        let columns = Array(repeating: "COUNT(CASE WHEN collection = ? THEN 1 END)", count: collections).joined(separator: ", ")
        return "SELECT \(columns) FROM records WHERE deleted = 0 AND \(condition)"
    }

    /// `GET /v1/records/{collection}/{uuid}`: 404 when absent or out of scope.
    func record(_ collection: String, _ uuidText: String, as principal: Principal) throws -> WireRecord {
        guard config.collections[collection] != nil else {
            throw APIError(.notFound, "There is no collection named '\(collection)'.")
        }
        guard let uuid = UUID.fromWire(uuidText) else {
            throw APIError(.invalidRequest, "The record id is not a UUID.", fields: ["uuid": "must be a UUID"])
        }
        let scope = Scope(principal: principal, config: config)
        let record = try database.read { sql in
            try sql.record(collection, uuid.wireText)
        }
        guard let record, scope.canRead(record) else {
            throw APIError(.notFound, "No such record, or it is not visible to you.")
        }
        return try record.wire()
    }

    /// `GET /v1/search`: text search over the caller's scope (see `RecordSearch`).
    func search(collection: String?, query: String?, limit: Int?, as principal: Principal) throws -> SearchResponse {
        guard let collection, config.collections[collection] != nil else {
            throw APIError(
                .invalidRequest, "Name a known collection to search.", fields: ["collection": "must be a known collection"])
        }
        guard let query, !query.isEmpty, query.utf8.count <= 200 else {
            throw APIError(.invalidRequest, "Give the text to search for (at most 200 bytes).", fields: ["q": "is required"])
        }
        let limit = limit ?? 50
        guard (1...config.maxSearchLimit).contains(limit) else {
            throw APIError(
                .invalidRequest, "The limit must be between 1 and \(config.maxSearchLimit).",
                fields: ["limit": "must be between 1 and \(config.maxSearchLimit)"])
        }
        // Text with no letter or digit ("*", an emoji) matches no word of any record.
        guard let search = RecordSearch(query) else { return SearchResponse(records: []) }
        let scope = Scope(principal: principal, config: config)
        var arguments: [SQLValue] = [.text(collection)]
        let condition = "collection = ? AND deleted = 0 AND " + scope.readable(&arguments)
        let rows = try database.read { sql in
            try search.newest(sql, columns: ServerRecord.columns, where: condition, arguments, limit: limit)
        }
        return SearchResponse(records: try rows.map { try ServerRecord($0).wire() })
    }

    /// `GET /v1/mutations/{id}`: the stored result, for a client resolving an unknown outcome.
    func mutation(_ idText: String, as principal: Principal) throws -> MutationLookup {
        guard let id = UUID.fromWire(idText) else {
            throw APIError(.invalidRequest, "The mutation id is not a UUID.", fields: ["id": "must be a UUID"])
        }
        // By id alone (the index that serves it needs no statistics to be
        // chosen); another user's rows under the same id are dropped here.
        // A slim result names its record by version: the record is given
        // while it is still at that version (the unique index on versions
        // finds it); one changed since is read with `GET /v1/records`.
        let (found, record) = try database.read { sql -> (SQLRow?, WireRecord?) in
            let row = try sql.query(
                "SELECT user_id, result, record_version FROM mutation_results WHERE mutation_id = ? ORDER BY created_at DESC",
                [try ResultIDs.current(sql).value(id)]
            ).first { $0.string(0) == principal.user }
            guard let version = row?.optionalInt(2) else { return (row, nil) }
            let current = try sql.first("SELECT \(ServerRecord.columns) FROM records WHERE version = ?", [.integer(version)])
            return (row, try current.map { try ServerRecord($0).wire() })
        }
        guard let found else { throw APIError(.notFound, "The server never processed this change.") }
        // Processed, but its result is past retention (only the id is kept).
        guard let result = StoredOutcome(text: found.optionalString(1), recordVersion: found.optionalInt(2)) else {
            return MutationLookup(status: .duplicate, record: nil, code: nil, errors: nil)
        }
        return MutationLookup(status: result.status, record: result.record ?? record, code: result.code, errors: result.errors)
    }
}
