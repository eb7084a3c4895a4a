/// A photo or file a record holds: the value of an `attachment` field,
/// `{"sha256": "<64 hex>", "size": <bytes>, "content_type": "<mime>"}`.
///
/// The bytes travel apart from the record, as a blob named by their
/// SHA-256, so the same photo is stored and uploaded once however many
/// records or devices name it.
public struct AttachedFile: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The SHA-256 of the bytes, as 64 lowercase hexadecimal digits.
    public var sha256: String
    /// How many bytes the blob holds.
    public var size: Int64
    /// The media type, e.g. `image/jpeg`.
    public var contentType: String

    /// An attachment naming a blob already hashed; nil unless `sha256` is 64
    /// hexadecimal digits, `size` is not negative and `contentType` is 1-255 bytes.
    public init?(sha256: String, size: Int64, contentType: String) {
        let sha = sha256.lowercased()
        guard Self.isBlobName(sha), size >= 0, !contentType.isEmpty, contentType.utf8.count <= 255 else { return nil }
        self.sha256 = sha
        self.size = size
        self.contentType = contentType
    }

    /// The attachment a JSON value holds, or nil when it is not exactly one.
    public init?(_ value: JSONValue) {
        guard let object = value.objectValue, object.count == 3, let sha = object[WireKey.sha256.name]?.stringValue,
            case .int(let size)? = object[WireKey.size.name], let contentType = object[WireKey.contentType.name]?.stringValue
        else { return nil }
        self.init(sha256: sha, size: size, contentType: contentType)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: WireKey.self)
        let sha = try container.decode(String.self, forKey: .sha256)
        let size = try container.decode(Int64.self, forKey: .size)
        let contentType = try container.decode(String.self, forKey: .contentType)
        guard let made = AttachedFile(sha256: sha, size: size, contentType: contentType) else {
            throw DecodingError.dataCorruptedError(
                forKey: .sha256, in: container,
                debugDescription: "an attachment is 64 hexadecimal digits, a size of 0 or more and a content type")
        }
        self = made
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encode(sha256, forKey: .sha256)
        try container.encode(size, forKey: .size)
        try container.encode(contentType, forKey: .contentType)
    }

    /// The value a record's field holds.
    public var jsonValue: JSONValue {
        .object([WireKey.sha256.name: .string(sha256), WireKey.size.name: .int(size), WireKey.contentType.name: .string(contentType)])
    }

    public var description: String { "\(contentType), \(size) bytes, \(sha256.prefix(12))…" }

    /// Whether `text` names a blob: 64 lowercase hexadecimal digits.
    public static func isBlobName(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    /// The attachments held by a record's top-level fields, by field.
    public static func all(in data: JSONObject?) -> [String: AttachedFile] {
        guard let data else { return [:] }
        var found: [String: AttachedFile] = [:]
        for (field, value) in data {
            guard case .object(let object) = value, object[WireKey.sha256.name] != nil, let attachment = AttachedFile(value) else { continue }
            found[field] = attachment
        }
        return found
    }
}
