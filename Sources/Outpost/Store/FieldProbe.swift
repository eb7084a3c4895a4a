import Foundation
import OutpostCore

/// Learns which stored field a key path of a record type reads.
///
/// Swift cannot name the property behind a key path, so the probe builds
/// instances of the type from made-up values through its own `Decodable`
/// conformance: once with every field at a base value, then once per field
/// with only that field changed. The field whose change shows through the
/// key path is the one it reads; the key path's value must also encode to
/// exactly what was fed there, so a computed property over a field is
/// refused rather than queried as if it were stored. Answers are cached per
/// key path: each type is probed once per key path a program uses.
enum FieldProbe {
    private static let cache = Locked<[AnyKeyPath: String]>([:])
    private static let fieldsCache = Locked<[ObjectIdentifier: Set<String>]>([:])

    /// The record type's own fields, as the store names them; nil when the
    /// type cannot be probed (its fields are then not checked).
    static func fieldNames<Record: SyncRecord>(of type: Record.Type) -> Set<String>? {
        if let known = fieldsCache.withLock({ $0[ObjectIdentifier(type)] }) { return known }
        guard let base = try? build(type, varying: nil) else { return nil }
        let names = Set(base.topLevelKeys.map { storedName($0, Record.fieldNaming) })
        fieldsCache.withLock { $0[ObjectIdentifier(type)] = names }
        return names
    }

    private static func storedName(_ property: String, _ naming: FieldNaming) -> String {
        naming == .snakeCase ? FieldNaming.snakeCase(property) : property
    }

    /// The field path (`"name"`, or `"address.city"` inside a nested
    /// struct) that `keyPath` reads, as the store keeps it.
    static func fieldPath<Record: SyncRecord, Value: Encodable & Equatable>(
        _ keyPath: KeyPath<Record, Value>
    ) throws -> String {
        if let known = cache.withLock({ $0[keyPath] }) { return known }
        let path = try resolve(keyPath)
        cache.withLock { $0[keyPath] = path }
        return path
    }

    private static func resolve<Record: SyncRecord, Value: Encodable & Equatable>(
        _ keyPath: KeyPath<Record, Value>
    ) throws -> String {
        let base = try build(Record.self, varying: nil)
        let baseValue = base.instance[keyPath: keyPath]
        var touched: [[String]] = []
        for (index, leaf) in base.leaves.enumerated() {
            let varied = try build(Record.self, varying: index)
            if varied.instance[keyPath: keyPath] != baseValue { touched.append(leaf.path) }
        }
        guard let first = touched.first else {
            throw StoreError.invalidQuery("\(Record.self)'s key path \(keyPath) does not read a stored field")
        }
        // Several leaves (a nested struct's fields) read through one key
        // path: the path is what they have in common.
        var prefix = first
        for path in touched.dropFirst() {
            prefix = Array(zip(prefix, path).prefix { $0 == $1 }.map(\.0))
        }
        let fed = subtree(at: prefix, of: base.leaves)
        guard !prefix.isEmpty, let fed, (try? JSONValueCoding.encode(baseValue, fieldNames: .asWritten)) == fed else {
            throw StoreError.invalidQuery(
                "\(Record.self)'s key path \(keyPath) is computed, not one stored field: filter by a stored property")
        }
        var names = prefix
        names[0] = storedName(names[0], Record.fieldNaming)
        for name in names where !CollectionSchema.isValidName(name) { throw StoreError.invalidName(name) }
        return names.joined(separator: ".")
    }

    /// The JSON the probe fed under `prefix`: a leaf's value, or the object
    /// made of the leaves below it (nil when they do not make one).
    private static func subtree(at prefix: [String], of leaves: [Leaf]) -> JSONValue? {
        let below = leaves.filter { $0.path.starts(with: prefix) }
        if below.count == 1, below[0].path == prefix { return below[0].value }
        guard !below.isEmpty, below.allSatisfy({ $0.path.count > prefix.count }) else { return nil }
        var object = JSONObject()
        for name in Set(below.map { $0.path[prefix.count] }) {
            guard let child = subtree(at: prefix + [name], of: below) else { return nil }
            object[name] = child
        }
        return .object(object)
    }

    struct Leaf {
        var path: [String]
        var value: JSONValue
    }

    private static func build<Record: Decodable>(
        _ type: Record.Type, varying: Int?
    ) throws -> (instance: Record, leaves: [Leaf], topLevelKeys: [String]) {
        let state = ProbeState(varying: varying)
        do {
            let instance = try Record(from: ProbeDecoder(state: state, codingPath: []))
            return (instance, state.leaves, state.topLevelKeys)
        } catch let error as ProbeFailure {
            throw StoreError.invalidQuery(
                "\(Record.self) cannot be queried by key path: its field \(error.path) of type \(error.type) cannot be made up "
                    + "(make the type CaseIterable, or filter by the field's name)")
        } catch {
            throw StoreError.invalidQuery("\(Record.self) cannot be queried by key path: decoding made-up values failed: \(error)")
        }
    }
}

/// A value type the probe could not make up (an enum that is not
/// `CaseIterable`, a type that validates what it decodes).
private struct ProbeFailure: Error {
    var path: String
    var type: String
}

/// What one probing run has fed so far, and which leaf it varies.
private final class ProbeState {
    let varying: Int?
    var leaves: [FieldProbe.Leaf] = []
    /// Every key the type asked for at the top: its fields, arrays and
    /// dictionaries included (they feed no leaf).
    var topLevelKeys: [String] = []

    func asked(_ key: some CodingKey, at codingPath: [any CodingKey]) {
        if codingPath.isEmpty { topLevelKeys.append(key.stringValue) }
    }

    init(varying: Int?) { self.varying = varying }

    /// A made-up value for one leaf of type `T`, or nil when `T` is not a leaf type.
    func leaf<T: Decodable>(_ type: T.Type, at codingPath: [any CodingKey]) throws -> T? {
        let index = leaves.count
        let alternate = varying == index
        guard let value = Self.madeUp(type, alternate: alternate, codingPath: codingPath) else { return nil }
        let json = (value as? any Encodable).flatMap { try? JSONValueCoding.encode($0) } ?? .null
        leaves.append(FieldProbe.Leaf(path: codingPath.map(\.stringValue), value: json))
        return value
    }

    private static func madeUp<T: Decodable>(_ type: T.Type, alternate: Bool, codingPath: [any CodingKey]) -> T? {
        let pick = alternate ? 1 : 0
        // Strings are uuid-shaped, so a type that parses its text as a
        // uuid (a record link) takes them too.
        let strings = ["00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"]
        let value: Any? =
            switch type {
            case is String.Type: strings[pick]
            case is Bool.Type: pick == 1
            case is Int.Type: pick + 1
            case is Int64.Type: Int64(pick + 1)
            case is Int32.Type: Int32(pick + 1)
            case is Int16.Type: Int16(pick + 1)
            case is Int8.Type: Int8(pick + 1)
            case is UInt.Type: UInt(pick + 1)
            case is UInt64.Type: UInt64(pick + 1)
            case is UInt32.Type: UInt32(pick + 1)
            case is UInt16.Type: UInt16(pick + 1)
            case is UInt8.Type: UInt8(pick + 1)
            case is Double.Type: Double(pick) + 1.5
            case is Float.Type: Float(pick) + 1.5
            case is Decimal.Type: Decimal(pick + 1)
            case is Date.Type: Date(timeIntervalSince1970: Double(pick + 1))
            case is UUID.Type: UUID(uuidString: strings[pick])
            case is URL.Type: URL(string: "https://probe.invalid/\(pick)")
            case is Data.Type: Data([UInt8(pick)])
            // Checked when decoded (64 hex digits), so made up whole: a field
            // to compare or test for nil, not to look into.
            case is AttachedFile.Type:
                AttachedFile(sha256: String(repeating: pick == 1 ? "b" : "a", count: 64), size: Int64(pick + 1), contentType: "image/jpeg")
            default: nil
            }
        if let value { return value as? T }
        if let iterable = type as? any CaseIterable.Type {
            let cases = allCases(of: iterable)
            guard !cases.isEmpty else { return nil }
            return cases[min(pick, cases.count - 1)] as? T
        }
        return nil
    }

    private static func allCases<C: CaseIterable>(of type: C.Type) -> [Any] { Array(type.allCases) }
}

private struct ProbeDecoder: Decoder {
    let state: ProbeState
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(ProbeKeyedContainer<Key>(state: state, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedDecodingContainer { ProbeUnkeyedContainer(codingPath: codingPath) }

    func singleValueContainer() -> any SingleValueDecodingContainer {
        ProbeSingleValueContainer(state: state, codingPath: codingPath)
    }

    /// A leaf's made-up value, or the nested type built by probing further.
    static func value<T: Decodable>(_ type: T.Type, state: ProbeState, codingPath: [any CodingKey]) throws -> T {
        if let leaf = try state.leaf(type, at: codingPath) { return leaf }
        do {
            return try T(from: ProbeDecoder(state: state, codingPath: codingPath))
        } catch let failure as ProbeFailure {
            throw failure
        } catch {
            throw ProbeFailure(path: codingPath.map(\.stringValue).joined(separator: "."), type: "\(T.self)")
        }
    }
}

private struct ProbeKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let state: ProbeState
    let codingPath: [any CodingKey]
    // Dictionaries ask which keys exist: none, so they come out empty.
    var allKeys: [Key] { [] }

    func contains(_ key: Key) -> Bool { true }
    func decodeNil(forKey key: Key) throws -> Bool { false }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        state.asked(key, at: codingPath)
        return try ProbeDecoder.value(type, state: state, codingPath: codingPath + [key])
    }
    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        state.asked(key, at: codingPath)
        return KeyedDecodingContainer(ProbeKeyedContainer<NestedKey>(state: state, codingPath: codingPath + [key]))
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        state.asked(key, at: codingPath)
        return ProbeUnkeyedContainer(codingPath: codingPath + [key])
    }
    func superDecoder() throws -> any Decoder { ProbeDecoder(state: state, codingPath: codingPath) }
    func superDecoder(forKey key: Key) throws -> any Decoder { ProbeDecoder(state: state, codingPath: codingPath + [key]) }
}

/// Arrays come out empty: a key path into an element is not a stored field.
private struct ProbeUnkeyedContainer: UnkeyedDecodingContainer {
    let codingPath: [any CodingKey]
    var count: Int? { 0 }
    var isAtEnd: Bool { true }
    var currentIndex: Int { 0 }

    private func end<T>(_ type: T.Type) -> DecodingError {
        .valueNotFound(type, DecodingError.Context(codingPath: codingPath, debugDescription: "the probe's arrays are empty"))
    }
    mutating func decodeNil() throws -> Bool { throw end(Never.self) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { throw end(type) }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        throw end(type)
    }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { throw end(Never.self) }
    mutating func superDecoder() throws -> any Decoder { throw end(Never.self) }
}

private struct ProbeSingleValueContainer: SingleValueDecodingContainer {
    let state: ProbeState
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool { false }
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        // The type asking for its own single value (a wrapper such as a
        // record link): what it decodes is the leaf.
        try ProbeDecoder.value(type, state: state, codingPath: codingPath)
    }
}
