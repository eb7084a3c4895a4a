import Foundation

/// Encodes `Encodable` values straight into `JSONValue`s, and decodes them
/// back, without JSON text in between.
///
/// A typed record write used to go value → JSONEncoder → bytes → parse →
/// `JSONValue`, and a typed read the reverse; the text step was most of the
/// Swift cost of a local write. The results match `WireCoding`'s
/// coders: dates as RFC 3339 UTC text with microseconds (the server's
/// `timestamp` fields), `Data` as base64, URLs as their absolute string,
/// UUIDs as lowercase text (the wire's references), decimals as numbers,
/// non-finite numbers refused, nil optionals left out.
///
/// `fieldNames` renames the top-level keys only (a record's fields, which
/// the server's schema names); keys inside nested values stay as written.
package enum JSONValueCoding {
    package static func encode<T: Encodable>(_ value: T, fieldNames: FieldNaming = .asWritten) throws -> JSONValue {
        let encoded = try ValueEncoder.box(value, codingPath: [])
        guard fieldNames == .snakeCase, case .object(var object) = encoded else { return encoded }
        // Only the fields whose names change move: building a second
        // dictionary of every field hashed each name again on every typed
        // write. A renamed field lands on a name no other property had (a
        // snake-case name has no capitals, a name that changes has some),
        // unless two properties name the same field.
        var renames: [(from: String, to: String)] = []
        for key in object.keys {
            let name = FieldNaming.snakeCase(key)
            if name != key { renames.append((key, name)) }
        }
        for (from, to) in renames {
            let field = object.removeValue(forKey: from)!
            guard object.updateValue(field, forKey: to) == nil else {
                throw EncodingError.invalidValue(
                    field, EncodingError.Context(codingPath: [], debugDescription: "two properties are both the field '\(to)'"))
            }
        }
        return .object(object)
    }

    /// Decodes a value; failures are `WireError`s naming the field at fault.
    package static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue, fieldNames: FieldNaming = .asWritten) throws -> T {
        do {
            return try ValueDecoder.unbox(type, from: value, codingPath: [], topLevelNaming: fieldNames)
        } catch let error as DecodingError {
            throw WireError(error)
        }
    }
}

/// How a record type's property names become the server's field names.
public enum FieldNaming: Sendable, Equatable {
    /// Each property (or `CodingKeys` raw value) is the field name as written.
    case asWritten
    /// `createdAt` is the field `created_at`, `photoURL` is `photo_url`; a
    /// name already in snake case (a `CodingKeys` raw value such as
    /// `"created_at"`) stays as it is.
    case snakeCase

    /// `createdAt` → `created_at`, `photoURL` → `photo_url`, `URLString` →
    /// `url_string`, `item2Count` → `item2_count`.
    public static func snakeCase(_ name: String) -> String {
        // Most field names are already lower-case ASCII: no work, no copy,
        // on every key of every typed read and write (one look at each byte:
        // a capital, or the start of a non-ASCII character).
        guard name.utf8.contains(where: { $0 &- UInt8(ascii: "A") < 26 || $0 >= 0x80 }) else { return name }
        // The others are a type's property names, met again on every write
        // of that type: each is converted once (walking Characters was a
        // tenth of a typed local write).
        if let known = converted.withLock({ $0[name] }) { return known }
        let result = convertToSnakeCase(name)
        converted.withLock { if $0.count < 4_096 { $0[name] = result } }
        return result
    }

    private static let converted = Locked<[String: String]>([:])

    private static func convertToSnakeCase(_ name: String) -> String {
        let characters = Array(name)
        guard characters.contains(where: \.isUppercase) else { return name }
        var result = ""
        for (index, character) in characters.enumerated() {
            if character.isUppercase, index > 0, characters[index - 1] != "_" {
                let previous = characters[index - 1]
                let nextIsLower = index + 1 < characters.count && characters[index + 1].isLowercase
                // A word starts at an upper-case letter after a lower-case
                // one or a digit, or at the last capital of an acronym.
                if previous.isLowercase || previous.isNumber || (previous.isUppercase && nextIsLower) {
                    result.append("_")
                }
            }
            result.append(contentsOf: character.lowercased())
        }
        return result
    }
}

// MARK: Encoding

/// A node being filled in: containers are references, so a nested container
/// handed out earlier can still add to its parent.
private final class EncodedNode {
    var value: JSONValue?
    var object: [String: EncodedChild]?
    var array: [EncodedChild]?

    init(_ value: JSONValue? = nil) { self.value = value }

    var json: JSONValue {
        if let object { return .object(object.mapValues(\.json)) }
        if let array { return .array(array.map(\.json)) }
        return value ?? .object([:])
    }
}

/// A container's member: a finished value (a record's fields, nearly
/// always), or a nested container still being filled in. Finished values
/// need no node of their own (an allocation per field of every typed write).
private enum EncodedChild {
    case value(JSONValue)
    case node(EncodedNode)

    var json: JSONValue {
        switch self {
        case .value(let value): value
        case .node(let node): node.json
        }
    }
}

private struct ValueEncoder: Encoder {
    let node: EncodedNode
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    static func box<T: Encodable>(_ value: T, codingPath: [any CodingKey]) throws -> JSONValue {
        switch value {
        case let date as Date: return .string(ServerTimestamp(date).rawValue)
        case let uuid as UUID: return .string(uuid.wireText)
        case let data as Data: return .string(data.base64EncodedString())
        case let url as URL: return .string(url.absoluteString)
        case let decimal as Decimal: return .double(NSDecimalNumber(decimal: decimal).doubleValue)
        case let text as String: return .string(text)
        case let flag as Bool: return .bool(flag)
        case let number as Int: return .int(Int64(number))
        case let number as Double: return try double(number, codingPath)
        // Every other primitive is handled here too: the containers' typed
        // `encode` requirements are met by their generic one, which calls
        // `box`, and a primitive's own `encode(to:)` would call back.
        case let number as any BinaryInteger: return try integer(number, codingPath)
        case let number as Float: return try double(Double(number), codingPath)
        default:
            let node = EncodedNode()
            try value.encode(to: ValueEncoder(node: node, codingPath: codingPath))
            return node.json
        }
    }

    static func double(_ number: Double, _ codingPath: [any CodingKey]) throws -> JSONValue {
        guard number.isFinite else {
            throw EncodingError.invalidValue(
                number, EncodingError.Context(codingPath: codingPath, debugDescription: "\(number) is not a JSON number"))
        }
        return .double(number)
    }

    static func integer<N: BinaryInteger>(_ number: N, _ codingPath: [any CodingKey]) throws -> JSONValue {
        if let exact = Int64(exactly: number) { return .int(exact) }
        return try double(Double(number), codingPath)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        // Room for a record's fields at once: grown from empty, the table was
        // rehashed several times on every typed write. (Nested values, often
        // a few members each, grow as they fill.)
        if node.object == nil { node.object = codingPath.isEmpty ? Dictionary(minimumCapacity: JSONScanner.fieldsAtOnce) : [:] }
        return KeyedEncodingContainer(KeyedValueEncoder<Key>(node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if node.array == nil { node.array = [] }
        return UnkeyedValueEncoder(node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { SingleValueEncoder(node: node, codingPath: codingPath) }
}

private struct KeyedValueEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: EncodedNode
    let codingPath: [any CodingKey]

    private func set(_ value: JSONValue, _ key: Key) { node.object![key.stringValue] = .value(value) }

    mutating func encodeNil(forKey key: Key) throws { set(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { set(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { set(.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws {
        set(try ValueEncoder.double(value, codingPath + [key]), key)
    }
    mutating func encode(_ value: Float, forKey key: Key) throws {
        set(try ValueEncoder.double(Double(value), codingPath + [key]), key)
    }
    mutating func encode(_ value: Int, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { set(.int(value), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { set(try ValueEncoder.integer(value, codingPath + [key]), key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        set(try ValueEncoder.box(value, codingPath: codingPath + [key]), key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    {
        let child = EncodedNode()
        node.object![key.stringValue] = .node(child)
        return ValueEncoder(node: child, codingPath: codingPath + [key]).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = EncodedNode()
        node.object![key.stringValue] = .node(child)
        return ValueEncoder(node: child, codingPath: codingPath + [key]).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder { superEncoder(named: PathKey.super) }

    mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(named: key) }

    private func superEncoder(named key: any CodingKey) -> any Encoder {
        let child = EncodedNode()
        node.object![key.stringValue] = .node(child)
        return ValueEncoder(node: child, codingPath: codingPath + [key])
    }
}

private struct UnkeyedValueEncoder: UnkeyedEncodingContainer {
    let node: EncodedNode
    let codingPath: [any CodingKey]
    var count: Int { node.array!.count }

    private var nextKey: PathKey { PathKey(count) }

    mutating func encodeNil() throws { node.array!.append(.value(.null)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        node.array!.append(.value(try ValueEncoder.box(value, codingPath: codingPath + [nextKey])))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let child = EncodedNode()
        let path = codingPath + [nextKey]
        node.array!.append(.node(child))
        return ValueEncoder(node: child, codingPath: path).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let child = EncodedNode()
        let path = codingPath + [nextKey]
        node.array!.append(.node(child))
        return ValueEncoder(node: child, codingPath: path).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        let child = EncodedNode()
        let path = codingPath + [nextKey]
        node.array!.append(.node(child))
        return ValueEncoder(node: child, codingPath: path)
    }
}

private struct SingleValueEncoder: SingleValueEncodingContainer {
    let node: EncodedNode
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws { node.value = .null }
    mutating func encode(_ value: Bool) throws { node.value = .bool(value) }
    mutating func encode(_ value: String) throws { node.value = .string(value) }
    mutating func encode(_ value: Double) throws { node.value = try ValueEncoder.double(value, codingPath) }
    mutating func encode(_ value: Float) throws { node.value = try ValueEncoder.double(Double(value), codingPath) }
    mutating func encode(_ value: Int) throws { node.value = .int(Int64(value)) }
    mutating func encode(_ value: Int64) throws { node.value = .int(value) }
    mutating func encode(_ value: UInt64) throws { node.value = try ValueEncoder.integer(value, codingPath) }
    mutating func encode<T: Encodable>(_ value: T) throws { node.value = try ValueEncoder.box(value, codingPath: codingPath) }
}

/// A key of a coding path that is not one of the type's own: an array
/// element's index, or "super".
private struct PathKey: CodingKey {
    let stringValue: String
    let intValue: Int?
    init(_ index: Int) {
        stringValue = "\(index)"
        intValue = index
    }
    init?(stringValue: String) {
        self.stringValue = stringValue
        intValue = nil
    }
    init?(intValue: Int) { self.init(intValue) }
    static let `super` = PathKey(stringValue: "super")!
}

// MARK: Decoding

private struct ValueDecoder: Decoder {
    let value: JSONValue
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// Set for the top level only: the record's own fields.
    var topLevelNaming: FieldNaming = .asWritten

    static func unbox<T: Decodable>(
        _ type: T.Type, from value: JSONValue, codingPath: [any CodingKey], topLevelNaming: FieldNaming = .asWritten
    ) throws -> T {
        if type == Date.self {
            switch value {
            case .string(let text):
                guard let date = ServerTimestamp.parse(text) else { throw mismatch(type, value, codingPath) }
                return date as! T
            case .int, .double:
                // Stores written before dates were text kept Foundation's
                // default: seconds since 2001-01-01.
                return Date(timeIntervalSinceReferenceDate: number(value)!) as! T
            default:
                throw mismatch(type, value, codingPath)
            }
        }
        if type == UUID.self {
            guard case .string(let text) = value, let uuid = UUID(uuidString: text) else { throw mismatch(type, value, codingPath) }
            return uuid as! T
        }
        if type == Data.self {
            guard case .string(let text) = value, let data = Data(base64Encoded: text) else {
                throw mismatch(type, value, codingPath)
            }
            return data as! T
        }
        if type == URL.self {
            guard case .string(let text) = value, let url = URL(string: text) else { throw mismatch(type, value, codingPath) }
            return url as! T
        }
        if type == Decimal.self {
            switch value {
            case .int(let number): return Decimal(number) as! T
            case .double(let number):
                // Through the shortest text that reads back as this double:
                // 12.34 stays 12.34, not 12.339999999999999857891452848.
                guard let decimal = Decimal(string: "\(number)", locale: Locale(identifier: "en_US_POSIX")) else {
                    throw mismatch(type, value, codingPath)
                }
                return decimal as! T
            case .string(let text):
                guard let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else {
                    throw mismatch(type, value, codingPath)
                }
                return decimal as! T
            default: throw mismatch(type, value, codingPath)
            }
        }
        return try T(from: ValueDecoder(value: value, codingPath: codingPath, topLevelNaming: topLevelNaming))
    }

    static func number(_ value: JSONValue) -> Double? {
        switch value {
        case .int(let number): return Double(number)
        case .double(let number): return number
        default: return nil
        }
    }

    static func integer<N: FixedWidthInteger>(_ type: N.Type, _ value: JSONValue, _ codingPath: [any CodingKey]) throws -> N {
        switch value {
        case .int(let number):
            if let exact = N(exactly: number) { return exact }
        case .double(let number):
            if let exact = N(exactly: number) { return exact }
        default: break
        }
        throw mismatch(type, value, codingPath)
    }

    static func mismatch(_ type: Any.Type, _ value: JSONValue, _ codingPath: [any CodingKey]) -> DecodingError {
        if value.isNull {
            return .valueNotFound(type, DecodingError.Context(codingPath: codingPath, debugDescription: "found null"))
        }
        return .typeMismatch(type, DecodingError.Context(codingPath: codingPath, debugDescription: "found \(value.typeName)"))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let object) = value else { throw Self.mismatch(JSONObject.self, value, codingPath) }
        return KeyedDecodingContainer(KeyedValueDecoder<Key>(object: object, codingPath: codingPath, naming: topLevelNaming))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let array) = value else { throw Self.mismatch([JSONValue].self, value, codingPath) }
        return UnkeyedValueDecoder(array: array, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }
}

extension ValueDecoder: SingleValueDecodingContainer {
    func decodeNil() -> Bool { value.isNull }
    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let flag) = value else { throw Self.mismatch(type, value, codingPath) }
        return flag
    }
    func decode(_ type: String.Type) throws -> String {
        guard case .string(let text) = value else { throw Self.mismatch(type, value, codingPath) }
        return text
    }
    func decode(_ type: Double.Type) throws -> Double {
        guard let number = Self.number(value) else { throw Self.mismatch(type, value, codingPath) }
        return number
    }
    func decode(_ type: Float.Type) throws -> Float {
        guard let number = Self.number(value) else { throw Self.mismatch(type, value, codingPath) }
        return Float(number)
    }
    func decode(_ type: Int.Type) throws -> Int { try Self.integer(type, value, codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try Self.integer(type, value, codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try Self.integer(type, value, codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try Self.integer(type, value, codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try Self.integer(type, value, codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try Self.integer(type, value, codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try Self.integer(type, value, codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try Self.integer(type, value, codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try Self.integer(type, value, codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try Self.integer(type, value, codingPath) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try Self.unbox(type, from: value, codingPath: codingPath) }
}

private struct KeyedValueDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let object: JSONObject
    let codingPath: [any CodingKey]
    var naming: FieldNaming = .asWritten

    var allKeys: [Key] { object.keys.compactMap { Key(stringValue: $0) } }

    /// The field a key reads: under snake case, `createdAt` reads `created_at`.
    private func field(_ key: Key) -> String {
        naming == .snakeCase ? FieldNaming.snakeCase(key.stringValue) : key.stringValue
    }

    func contains(_ key: Key) -> Bool { object[field(key)] != nil }

    /// The field's value as stored (`keyNotFound` when absent).
    private func raw(_ key: Key) throws -> JSONValue {
        guard let value = object[field(key)] else {
            throw DecodingError.keyNotFound(
                key, DecodingError.Context(codingPath: codingPath, debugDescription: "no value for \(key.stringValue)"))
        }
        return value
    }

    private func value(_ key: Key) throws -> ValueDecoder { ValueDecoder(value: try raw(key), codingPath: codingPath + [key]) }

    // The common field types are read from the value in place: a decoder
    // per field made its coding path (an array) for every field of every
    // typed read, needed only to name the field in an error.
    func decodeNil(forKey key: Key) throws -> Bool { try raw(key).isNull }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        let value = try raw(key)
        guard case .bool(let flag) = value else { throw ValueDecoder.mismatch(type, value, codingPath + [key]) }
        return flag
    }
    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        let value = try raw(key)
        guard case .string(let text) = value else { throw ValueDecoder.mismatch(type, value, codingPath + [key]) }
        return text
    }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        let value = try raw(key)
        guard let number = ValueDecoder.number(value) else { throw ValueDecoder.mismatch(type, value, codingPath + [key]) }
        return number
    }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try integer(try raw(key), key) }

    /// An Int field's value; the coding path is made only for an error.
    private func integer(_ value: JSONValue, _ key: Key) throws -> Int {
        if case .int(let number) = value, let exact = Int(exactly: number) { return exact }
        return try ValueDecoder.integer(Int.self, value, codingPath + [key])
    }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
        if case .int(let number) = try raw(key) { return number }
        return try value(key).decode(type)
    }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try value(key).decode(type) }

    // An optional field is looked up once (the protocol's default looks it
    // up three times: present, null, value).
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        guard let value = object[field(key)], !value.isNull else { return nil }
        guard case .string(let text) = value else { throw ValueDecoder.mismatch(type, value, codingPath + [key]) }
        return text
    }
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
        guard let value = object[field(key)], !value.isNull else { return nil }
        guard case .bool(let flag) = value else { throw ValueDecoder.mismatch(type, value, codingPath + [key]) }
        return flag
    }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
        guard let value = object[field(key)], !value.isNull else { return nil }
        return try integer(value, key)
    }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let value = object[field(key)], !value.isNull else { return nil }
        return try ValueDecoder(value: value, codingPath: codingPath + [key]).decode(type)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        try value(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { try value(key).unkeyedContainer() }

    func superDecoder() throws -> any Decoder {
        ValueDecoder(value: object[PathKey.super.stringValue] ?? .null, codingPath: codingPath + [PathKey.super])
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        ValueDecoder(value: object[field(key)] ?? .null, codingPath: codingPath + [key])
    }
}

private struct UnkeyedValueDecoder: UnkeyedDecodingContainer {
    let array: [JSONValue]
    let codingPath: [any CodingKey]
    var currentIndex = 0

    init(array: [JSONValue], codingPath: [any CodingKey]) {
        self.array = array
        self.codingPath = codingPath
    }

    var count: Int? { array.count }
    var isAtEnd: Bool { currentIndex >= array.count }

    private mutating func next(_ type: Any.Type) throws -> ValueDecoder {
        let path = codingPath + [PathKey(currentIndex)]
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(type, DecodingError.Context(codingPath: path, debugDescription: "the array ended"))
        }
        defer { currentIndex += 1 }
        return ValueDecoder(value: array[currentIndex], codingPath: path)
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, array[currentIndex].isNull else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next(type).decode(type) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next(JSONObject.self).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next([JSONValue].self).unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder { try next(Any.self) }
}
