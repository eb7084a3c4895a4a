public import Foundation

/// A record as the server holds it and sends it (docs/protocol.md, "Records").
///
/// An app meets it as the copy that prevailed in a ``ConflictReport``.
public struct WireRecord: Sendable, Equatable, Codable {
    /// The collection the record belongs to.
    public var collection: String
    /// Generated on the device; the identity of the record everywhere.
    public var uuid: UUID
    /// The server's own integer id, assigned when the record was first stored.
    public var id: Int64
    /// The server change sequence at the record's last write: the
    /// optimistic-concurrency token a client sends back as `base_version`.
    public var version: Int64
    /// When the server stored the record's last write, in the server's time.
    public var updatedAt: ServerTimestamp
    /// True for a tombstone: the record was deleted.
    public var deleted: Bool
    /// The user who owns the record.
    public var owner: String
    /// The team the record belongs to.
    public var team: String
    /// The fields; nil for a tombstone.
    public var data: JSONObject?
    /// When the last write was made on the device that made it, by that
    /// device's clock (nil when it did not say). `updatedAt` is when the
    /// server received it.
    public var deviceTime: ServerTimestamp?

    package init(
        collection: String, uuid: UUID, id: Int64, version: Int64, updatedAt: ServerTimestamp,
        deleted: Bool, owner: String, team: String, data: JSONObject?, deviceTime: ServerTimestamp? = nil
    ) {
        self.deviceTime = deviceTime
        self.collection = collection
        self.uuid = uuid
        self.id = id
        self.version = version
        self.updatedAt = updatedAt
        self.deleted = deleted
        self.owner = owner
        self.team = team
        self.data = data
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: WireKey.self)
        collection = try container.decodeNonEmpty(.collection)
        uuid = try container.decodeUUID(forKey: .uuid)
        id = try container.decode(Int64.self, forKey: .id)
        version = try container.decode(Int64.self, forKey: .version)
        updatedAt = try container.decode(ServerTimestamp.self, forKey: .updatedAt)
        deleted = try container.decode(Bool.self, forKey: .deleted)
        owner = try container.decode(String.self, forKey: .owner)
        team = try container.decode(String.self, forKey: .team)
        data = try container.decodeIfPresent(JSONObject.self, forKey: .data)
        deviceTime = try container.decodeIfPresent(ServerTimestamp.self, forKey: .deviceTime)
        if !deleted && data == nil {
            throw DecodingError.dataCorruptedError(
                forKey: .data, in: container, debugDescription: "must be an object for a record that is not deleted")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encode(collection, forKey: .collection)
        try container.encodeUUID(uuid, forKey: .uuid)
        try container.encode(id, forKey: .id)
        try container.encode(version, forKey: .version)
        try container.encode(updatedAt, forKey: .updatedAt)
        try container.encode(deleted, forKey: .deleted)
        try container.encode(owner, forKey: .owner)
        try container.encode(team, forKey: .team)
        if let data { try container.encode(data, forKey: .data) } else { try container.encodeNil(forKey: .data) }
        try container.encodeIfPresent(deviceTime, forKey: .deviceTime)
    }
}
