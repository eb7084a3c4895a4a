import Foundation
import OutpostCore

/// Queries over sealed payloads (a store with a `PayloadCipher`): SQLite
/// cannot read the fields, so the store opens the collection's records and
/// applies the query here — with SQLite's own rules (what `json_extract`
/// returns, NULL logic, the order of types), so a query answers the same
/// with or without a cipher. A test runs random queries both ways.
extension RecordQuery {
    func apply(to rows: [RecordRow]) throws -> [RecordRow] {
        // Names are checked as the SQL path checks them.
        try checkNames()
        var kept = try rows.filter { row in try filter.map { try $0.evaluate(row) == true } ?? true }
        let order = self.order
        kept.sort { left, right in
            for term in order {
                let (a, b, ascending): (SQLScalar, SQLScalar, Bool)
                switch term {
                case .field(let name, let up): (a, b, ascending) = (SQLScalar(json: left.data.field(at: name)), SQLScalar(json: right.data.field(at: name)), up)
                case .localUpdatedAt(let up): (a, b, ascending) = (SQLScalar(left.localUpdatedAt), SQLScalar(right.localUpdatedAt), up)
                case .serverUpdatedAt(let up):
                    (a, b, ascending) = (SQLScalar(left.serverUpdatedAt?.rawValue), SQLScalar(right.serverUpdatedAt?.rawValue), up)
                }
                let comparison = SQLScalar.sortOrder(a, b)
                if comparison != 0 { return ascending ? comparison < 0 : comparison > 0 }
            }
            return left.uuid.wireText < right.uuid.wireText
        }
        if let limit { kept = Array(kept.prefix(max(0, limit))) }
        return kept
    }

    private func checkNames() throws {
        func check(_ filter: RecordFilter) throws {
            switch filter {
            case .equals(let field, _), .notEquals(let field, _), .lessThan(let field, _), .greaterThan(let field, _),
                .contains(let field, _), .isNull(let field):
                try RecordQuery.checkFieldPath(field)
            case .syncState: break
            case .and(let filters), .or(let filters): try filters.forEach(check)
            case .not(let inner): try check(inner)
            }
        }
        try filter.map(check)
        for case .field(let name, _) in order { try RecordQuery.checkFieldPath(name) }
    }
}

extension RecordFilter {
    /// SQL's three-valued answer: nil is NULL (neither true nor false).
    func evaluate(_ row: RecordRow) throws -> Bool? {
        switch self {
        case .equals(let field, let value):
            let stored = SQLScalar(json: row.data.field(at: field))
            if value.isNull { return stored.isNull }
            return SQLScalar.compare(stored, SQLScalar(json: value)).map { $0 == 0 }
        case .notEquals(let field, let value):
            // `IS NOT`: never NULL.
            let stored = SQLScalar(json: row.data.field(at: field))
            let bound = SQLScalar(json: value)
            if stored.isNull || bound.isNull { return stored.isNull != bound.isNull }
            return SQLScalar.compare(stored, bound) != 0
        case .lessThan(let field, let value):
            return SQLScalar.compare(SQLScalar(json: row.data.field(at: field)), SQLScalar(json: value)).map { $0 < 0 }
        case .greaterThan(let field, let value):
            return SQLScalar.compare(SQLScalar(json: row.data.field(at: field)), SQLScalar(json: value)).map { $0 > 0 }
        case .contains(let field, let text):
            guard let haystack = SQLScalar(json: row.data.field(at: field)).text else { return nil }
            // LIKE: case-insensitive for ASCII letters only.
            return SQLScalar.asciiLowercased(haystack).contains(SQLScalar.asciiLowercased(text)) || text.isEmpty
        case .isNull(let field):
            return SQLScalar(json: row.data.field(at: field)).isNull
        case .syncState(let state):
            return row.syncState == state
        case .and(let filters):
            var sawNull = false
            for filter in filters {
                switch try filter.evaluate(row) {
                case false?: return false
                case nil: sawNull = true
                case true?: break
                }
            }
            return sawNull ? nil : true
        case .or(let filters):
            var sawNull = false
            for filter in filters {
                switch try filter.evaluate(row) {
                case true?: return true
                case nil: sawNull = true
                case false?: break
                }
            }
            return sawNull ? nil : false
        case .not(let inner):
            return try inner.evaluate(row).map { !$0 }
        }
    }
}

/// A value as SQLite sees it in a comparison.
enum SQLScalar {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)

    /// What `json_extract(data, '$.field')` returns for a stored field (and
    /// what `RecordQuery` binds for a value).
    init(json: JSONValue?) {
        switch json {
        case nil, .null?: self = .null
        case .bool(let flag)?: self = .integer(flag ? 1 : 0)
        case .int(let number)?: self = .integer(number)
        case .double(let number)?: self = .real(number)
        case .string(let text)?: self = .text(text)
        case let value?: self = .text((try? value.jsonText()) ?? "null")
        }
    }

    init(_ text: String?) { self = text.map { .text($0) } ?? .null }

    var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The value as text, as SQLite converts it for LIKE; nil for NULL.
    var text: String? {
        switch self {
        case .null: return nil
        case .integer(let number): return String(number)
        case .real(let number):
            // SQLite writes reals with "%!.15g": always with a decimal point.
            let text = String(format: "%.15g", number)
            return text.contains(where: { ".eEni".contains($0) }) ? text : text + ".0"
        case .text(let text): return text
        }
    }

    /// NULL sorts first, then numbers, then text (SQLite's order of types).
    private var typeRank: Int {
        switch self {
        case .null: return 0
        case .integer, .real: return 1
        case .text: return 2
        }
    }

    /// A comparison operator's answer: nil when either side is NULL.
    static func compare(_ a: SQLScalar, _ b: SQLScalar) -> Int? {
        if a.isNull || b.isNull { return nil }
        return sortOrder(a, b)
    }

    /// ORDER BY's order: -1, 0 or 1.
    static func sortOrder(_ a: SQLScalar, _ b: SQLScalar) -> Int {
        if a.typeRank != b.typeRank { return a.typeRank < b.typeRank ? -1 : 1 }
        switch (a, b) {
        case (.integer(let x), .integer(let y)): return x < y ? -1 : (x > y ? 1 : 0)
        case (.text(let x), .text(let y)):
            // BINARY collation: UTF-8 bytes.
            return x.utf8.lexicographicallyPrecedes(y.utf8) ? -1 : (x == y ? 0 : 1)
        default:
            let x = a.number, y = b.number
            return x < y ? -1 : (x > y ? 1 : 0)
        }
    }

    private var number: Double {
        switch self {
        case .integer(let number): return Double(number)
        case .real(let number): return number
        default: return 0
        }
    }

    static func asciiLowercased(_ text: String) -> String {
        String(decoding: text.utf8.map { (65...90).contains($0) ? $0 + 32 : $0 }, as: UTF8.self)
    }
}
