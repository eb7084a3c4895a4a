import Foundation
public import OutpostCore

/// A condition on a record type's stored properties, for typed queries.
///
/// Name a property by key path and the compiler checks it exists and that
/// the value has its type; the store works out the field it is stored in:
///
/// ```swift
/// let late = try await store.query(Visit.self, where: .greaterThan(\.visitedAt, cutoff) && .isNil(\.notes),
///                                  orderBy: [.descending(\.visitedAt)], limit: 20)
/// ```
///
/// A field can also be named as it is stored (`.equals("name", "Ana")`);
/// the name is checked against the type's fields at the call, so a typo
/// fails plainly instead of matching nothing. A key path that is not one
/// stored property (a computed property, an element of an array) fails
/// with ``StoreError/invalidQuery(_:)`` when the query runs.
public struct FieldFilter<Record: SyncRecord>: Sendable {
    /// The condition in the store's terms, or why it cannot be built.
    let resolved: Result<RecordFilter, StoreError>

    init(_ build: () throws -> RecordFilter) { resolved = StoreError.resolving(build) }

    /// The condition as the untyped ``RecordFilter`` it stands for.
    package func recordFilter() throws -> RecordFilter { try resolved.get() }

    /// Any untyped filter, its field names checked against the record type.
    public static func matching(_ filter: RecordFilter) -> Self {
        Self { try checked(filter) }
    }

    private static func checked(_ filter: RecordFilter) throws -> RecordFilter {
        switch filter {
        case .equals(let field, _), .notEquals(let field, _), .lessThan(let field, _), .greaterThan(let field, _),
            .contains(let field, _), .isNull(let field):
            try check(field)
        case .and(let filters), .or(let filters):
            for inner in filters { _ = try checked(inner) }
        case .not(let inner):
            _ = try checked(inner)
        case .syncState:
            break
        }
        return filter
    }

    /// Throws when the record type has no field of this name.
    static func check(_ field: String) throws {
        try RecordQuery.checkFieldPath(field)
        let top = field.split(separator: ".", maxSplits: 1).first.map(String.init) ?? field
        guard let known = FieldProbe.fieldNames(of: Record.self), !known.contains(top) else { return }
        throw StoreError.invalidQuery(
            "\(Record.self) has no field '\(top)' (its fields: \(known.sorted().joined(separator: ", ")))")
    }

    private static func value<Value: Encodable>(_ value: Value) throws -> JSONValue {
        do {
            return try JSONValueCoding.encode(value)
        } catch {
            throw StoreError.invalidQuery("\(value) cannot be compared with a stored field: \(error)")
        }
    }

    // MARK: By key path

    /// The property equals the value; comparing with nil matches an absent or null field.
    public static func equals<Value: Encodable & Equatable>(_ keyPath: KeyPath<Record, Value>, _ value: Value) -> Self {
        Self { .equals(try FieldProbe.fieldPath(keyPath), try Self.value(value)) }
    }

    /// The property differs from the value (an absent field counts as different).
    public static func notEquals<Value: Encodable & Equatable>(_ keyPath: KeyPath<Record, Value>, _ value: Value) -> Self {
        Self { .notEquals(try FieldProbe.fieldPath(keyPath), try Self.value(value)) }
    }

    /// The property is less than the value; an absent field never matches.
    public static func lessThan<Value: Encodable & Comparable>(_ keyPath: KeyPath<Record, Value>, _ value: Value) -> Self {
        Self { .lessThan(try FieldProbe.fieldPath(keyPath), try Self.value(value)) }
    }

    /// The optional property is less than the value; an absent field never matches.
    public static func lessThan<Value: Encodable & Comparable>(_ keyPath: KeyPath<Record, Value?>, _ value: Value) -> Self {
        Self { .lessThan(try FieldProbe.fieldPath(keyPath), try Self.value(value)) }
    }

    /// The property is greater than the value; an absent field never matches.
    public static func greaterThan<Value: Encodable & Comparable>(_ keyPath: KeyPath<Record, Value>, _ value: Value) -> Self {
        Self { .greaterThan(try FieldProbe.fieldPath(keyPath), try Self.value(value)) }
    }

    /// The optional property is greater than the value; an absent field never matches.
    public static func greaterThan<Value: Encodable & Comparable>(_ keyPath: KeyPath<Record, Value?>, _ value: Value) -> Self {
        Self { .greaterThan(try FieldProbe.fieldPath(keyPath), try Self.value(value)) }
    }

    /// Case-insensitive substring match on a text property.
    public static func contains(_ keyPath: KeyPath<Record, String>, _ text: String) -> Self {
        Self { .contains(try FieldProbe.fieldPath(keyPath), text) }
    }

    /// Case-insensitive substring match on an optional text property.
    public static func contains(_ keyPath: KeyPath<Record, String?>, _ text: String) -> Self {
        Self { .contains(try FieldProbe.fieldPath(keyPath), text) }
    }

    /// The optional property is nil (absent or null in the store).
    public static func isNil<Wrapped: Encodable & Equatable>(_ keyPath: KeyPath<Record, Wrapped?>) -> Self {
        Self { .isNull(try FieldProbe.fieldPath(keyPath)) }
    }

    // MARK: By stored name

    /// The field equals the value; comparing with `.null` matches an absent or null field.
    public static func equals(_ field: String, _ value: JSONValue) -> Self { matching(.equals(field, value)) }
    /// The field differs from the value.
    public static func notEquals(_ field: String, _ value: JSONValue) -> Self { matching(.notEquals(field, value)) }
    /// The field is less than the value.
    public static func lessThan(_ field: String, _ value: JSONValue) -> Self { matching(.lessThan(field, value)) }
    /// The field is greater than the value.
    public static func greaterThan(_ field: String, _ value: JSONValue) -> Self { matching(.greaterThan(field, value)) }
    /// Case-insensitive substring match on a text field.
    public static func contains(_ field: String, _ text: String) -> Self { matching(.contains(field, text)) }
    /// The field is absent or null.
    public static func isNull(_ field: String) -> Self { matching(.isNull(field)) }

    // MARK: Combining

    /// Records in this sync state, e.g. `.rejected` for refused changes.
    public static func syncState(_ state: SyncState) -> Self { Self { .syncState(state) } }

    /// Every one of the filters holds; an empty list matches every record.
    public static func and(_ filters: [Self]) -> Self { Self { .and(try filters.map { try $0.resolved.get() }) } }

    /// At least one of the filters holds; an empty list matches no record.
    public static func or(_ filters: [Self]) -> Self { Self { .or(try filters.map { try $0.resolved.get() }) } }

    /// The filter does not hold.
    public static func not(_ filter: Self) -> Self { Self { .not(try filter.resolved.get()) } }

    /// Both filters hold.
    public static func && (lhs: Self, rhs: Self) -> Self { and([lhs, rhs]) }

    /// Either filter holds.
    public static func || (lhs: Self, rhs: Self) -> Self { or([lhs, rhs]) }

    /// The filter does not hold.
    public static prefix func ! (filter: Self) -> Self { not(filter) }
}

/// A sort term for typed queries: a stored property by key path, or the
/// record's local or server time.
public struct FieldOrder<Record: SyncRecord>: Sendable {
    let resolved: Result<RecordOrder, StoreError>

    private init(_ build: () throws -> RecordOrder) { resolved = StoreError.resolving(build) }

    /// Smallest first.
    public static func ascending<Value: Encodable & Equatable>(_ keyPath: KeyPath<Record, Value>) -> Self {
        Self { .field(try FieldProbe.fieldPath(keyPath), ascending: true) }
    }

    /// Largest first.
    public static func descending<Value: Encodable & Equatable>(_ keyPath: KeyPath<Record, Value>) -> Self {
        Self { .field(try FieldProbe.fieldPath(keyPath), ascending: false) }
    }

    /// By a field named as stored, checked against the record type's fields.
    public static func field(_ name: String, ascending: Bool = true) -> Self {
        Self {
            try FieldFilter<Record>.check(name)
            return .field(name, ascending: ascending)
        }
    }

    /// Most recent local edit first when descending.
    public static func localUpdatedAt(ascending: Bool = false) -> Self { Self { .localUpdatedAt(ascending: ascending) } }

    /// Most recently written on the server first when descending.
    public static func serverUpdatedAt(ascending: Bool = false) -> Self { Self { .serverUpdatedAt(ascending: ascending) } }
}

extension StoreError {
    /// A query term built now, or why it cannot be (reported when the query runs).
    static func resolving<Term>(_ build: () throws -> Term) -> Result<Term, StoreError> {
        do {
            return .success(try build())
        } catch let error as StoreError {
            return .failure(error)
        } catch {
            return .failure(.invalidQuery("\(error)"))
        }
    }
}

extension RecordQuery {
    /// A typed query's terms in the store's own.
    init<Record: SyncRecord>(
        _ type: Record.Type, filter: FieldFilter<Record>?, order: [FieldOrder<Record>], limit: Int?
    ) throws {
        self.init(
            Record.collection, filter: try filter?.resolved.get(), order: try order.map { try $0.resolved.get() }, limit: limit)
    }
}
