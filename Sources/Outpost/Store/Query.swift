import Foundation
public import OutpostCore
import OutpostSQLite

/// A condition on records, turned into SQL over the stored JSON fields.
public indirect enum RecordFilter: Sendable, Equatable {
    /// The field equals the value; comparing with `.null` matches an absent or null field.
    ///
    /// Fields are named as stored; `address.city` names a field inside a
    /// nested object.
    case equals(String, JSONValue)
    /// The field differs from the value (an absent field counts as different); with `.null`, the field is present and not null.
    case notEquals(String, JSONValue)
    /// The field is less than the value; an absent or null field never matches.
    case lessThan(String, JSONValue)
    /// The field is greater than the value; an absent or null field never matches.
    case greaterThan(String, JSONValue)
    /// Case-insensitive substring match on a text field.
    case contains(String, String)
    /// The field is absent or null.
    case isNull(String)
    /// Records in this sync state, e.g. `.rejected` for refused changes.
    case syncState(SyncState)
    /// Every one of the filters holds; an empty list matches every record.
    case and([RecordFilter])
    /// At least one of the filters holds; an empty list matches no record.
    case or([RecordFilter])
    /// The filter does not hold.
    case not(RecordFilter)
}

/// What records are sorted by.
public enum RecordOrder: Sendable, Equatable {
    /// By a field's value, ascending unless told otherwise.
    case field(String, ascending: Bool = true)
    /// Most recent local edit first when descending.
    case localUpdatedAt(ascending: Bool = false)
    /// Most recently written on the server first when descending.
    case serverUpdatedAt(ascending: Bool = false)
}

/// A query over one collection: filter, order, limit.
public struct RecordQuery: Sendable, Equatable {
    /// The collection to read.
    public var collection: String
    /// Which records to return; nil returns them all (deleted records never come back).
    public var filter: RecordFilter?
    /// Sort terms, applied in turn; ties fall back to uuid order.
    public var order: [RecordOrder]
    /// At most this many records; nil for no limit.
    public var limit: Int?

    /// A query over `collection`; by default every record, in uuid order, with no limit.
    public init(_ collection: String, filter: RecordFilter? = nil, order: [RecordOrder] = [], limit: Int? = nil) {
        self.collection = collection
        self.filter = filter
        self.order = order
        self.limit = limit
    }

    /// The SQL and its arguments. Field names are checked against a small
    /// alphabet because they go into JSON paths; values are always bound.
    func sql() throws -> (String, [SQLiteValue]) {
        var arguments: [SQLiteValue] = []
        var sql = RecordTable.liveRowsQuery(collection)
        if let filter {
            sql += " AND " + (try Self.render(filter, &arguments))
        }
        var orderTerms: [String] = []
        for term in order {
            switch term {
            case .field(let name, let ascending):
                orderTerms.append("\(try Self.path(name)) \(ascending ? "ASC" : "DESC")")
            case .localUpdatedAt(let ascending):
                orderTerms.append("local_updated_at \(ascending ? "ASC" : "DESC")")
            case .serverUpdatedAt(let ascending):
                orderTerms.append("server_updated_at \(ascending ? "ASC" : "DESC")")
            }
        }
        orderTerms.append("uuid")
        sql += " ORDER BY " + orderTerms.joined(separator: ", ")
        if let limit {
            sql += " LIMIT ?"
            arguments.append(.integer(Int64(max(0, limit))))
        }
        return (sql, arguments)
    }

    /// A field path is a field's name, or names joined by dots for a field
    /// inside a nested object (`address.city`); each name is checked.
    static func checkFieldPath(_ field: String) throws {
        for name in field.split(separator: ".", omittingEmptySubsequences: false) where !CollectionSchema.isValidName(String(name)) {
            throw StoreError.invalidName(field)
        }
    }

    private static func path(_ field: String) throws -> String {
        try checkFieldPath(field)
        return "json_extract(data, '$.\(field)')"
    }

    private static func bind(_ value: JSONValue, _ arguments: inout [SQLiteValue]) -> String {
        switch value {
        case .null: arguments.append(.null)
        case .bool(let flag): arguments.append(.integer(flag ? 1 : 0))
        case .int(let number): arguments.append(.integer(number))
        case .double(let number): arguments.append(.real(number))
        case .string(let text): arguments.append(.text(text))
        case .array, .object: arguments.append(.text((try? value.jsonText()) ?? "null"))
        }
        return "?"
    }

    private static func render(_ filter: RecordFilter, _ arguments: inout [SQLiteValue]) throws -> String {
        switch filter {
        case .equals(let field, let value):
            if value.isNull { return "\(try path(field)) IS NULL" }
            return "\(try path(field)) = \(bind(value, &arguments))"
        case .notEquals(let field, let value):
            if value.isNull { return "\(try path(field)) IS NOT NULL" }
            return "\(try path(field)) IS NOT \(bind(value, &arguments))"
        case .lessThan(let field, let value):
            return "\(try path(field)) < \(bind(value, &arguments))"
        case .greaterThan(let field, let value):
            return "\(try path(field)) > \(bind(value, &arguments))"
        case .contains(let field, let text):
            let escaped = text.replacingOccurrences(of: "\\", with: "\\\\")
                .replacingOccurrences(of: "%", with: "\\%").replacingOccurrences(of: "_", with: "\\_")
            arguments.append(.text("%\(escaped)%"))
            return "\(try path(field)) LIKE ? ESCAPE '\\'"
        case .isNull(let field):
            return "\(try path(field)) IS NULL"
        case .syncState(let state):
            // A literal (from a fixed enum): only then can SQLite use the
            // partial index of refused records for `.rejected`.
            return "sync_state = '\(state.rawValue)'"
        case .and(let filters):
            guard !filters.isEmpty else { return "1" }
            return "(" + (try filters.map { try render($0, &arguments) }).joined(separator: " AND ") + ")"
        case .or(let filters):
            guard !filters.isEmpty else { return "0" }
            return "(" + (try filters.map { try render($0, &arguments) }).joined(separator: " OR ") + ")"
        case .not(let inner):
            return "NOT (\(try render(inner, &arguments)))"
        }
    }
}

extension JSONObject {
    /// The value at a field path (`address.city` looks inside `address`).
    func field(at path: String) -> JSONValue? {
        guard path.contains(".") else { return self[path] }
        var names = path.split(separator: ".").map(String.init)
        var current: JSONValue? = self[names.removeFirst()]
        for name in names {
            guard case .object(let object)? = current else { return nil }
            current = object[name]
        }
        return current
    }
}

extension RecordTables {
    /// Runs a query; deleted records (local tombstones awaiting the server) are never returned.
    func query(_ query: RecordQuery) throws -> [JSONRecord] {
        if payloads.seals {
            // SQLite cannot read sealed fields: open the records and query them here.
            let rows = try table(query.collection).liveRows { row in try damage.tolerating { try RecordRow(collection: query.collection, row: row, payloads: payloads) } }
            return try query.apply(to: rows.compactMap { $0 }).map { $0.localRecord($0.data) }
        }
        // A damaged row is stepped over (and reported), never the whole list lost.
        let (sql, arguments) = try query.sql()
        return try table(query.collection).rows(sql, arguments) { row in
            try damage.tolerating {
                let record = try RecordRow(collection: query.collection, row: row, payloads: payloads)
                return record.localRecord(record.data)
            }
        }.compactMap { $0 }
    }
}
