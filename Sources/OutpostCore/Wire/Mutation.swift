package import Foundation

/// What a mutation does to a record.
public enum MutationOp: String, Sendable, Codable, CaseIterable {
    /// Make a new record, change some of its fields, or delete it (the server keeps a tombstone).
    case create, update, delete

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let op = MutationOp(rawValue: text) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "must be one of create, update, delete (got '\(text)')")
        }
        self = op
    }
}

/// One change sent in a push (docs/protocol.md, "POST /v1/push").
package struct Mutation: Sendable, Equatable, Codable {
    /// Per-client, strictly increasing; fixed when the mutation is first sent.
    package var seq: Int64
    /// Unique per client; used to ask `GET /v1/mutations/{id}` about an unknown outcome.
    package var id: UUID
    package var op: MutationOp
    package var collection: String
    package var uuid: UUID
    /// The server version the device saw before its first local edit; nil
    /// makes an update or delete unconditional.
    package var baseVersion: Int64?
    /// Full fields for a create, a partial patch for an update, nil for a delete.
    package var data: JSONObject?
    /// When the edit was made, by the device's clock (RFC 3339): kept and
    /// shown beside the server's time, never used for ordering.
    package var deviceTime: ServerTimestamp?

    package init(
        seq: Int64, id: UUID, op: MutationOp, collection: String, uuid: UUID, baseVersion: Int64? = nil,
        data: JSONObject? = nil, deviceTime: ServerTimestamp? = nil
    ) {
        self.deviceTime = deviceTime
        self.seq = seq
        self.id = id
        self.op = op
        self.collection = collection
        self.uuid = uuid
        self.baseVersion = baseVersion
        self.data = data
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: WireKey.self)
        seq = try container.decode(Int64.self, forKey: .seq)
        guard seq > 0 else {
            throw DecodingError.dataCorruptedError(forKey: .seq, in: container, debugDescription: "must be positive")
        }
        id = try container.decodeUUID(forKey: .id)
        op = try container.decode(MutationOp.self, forKey: .op)
        collection = try container.decodeNonEmpty(.collection)
        uuid = try container.decodeUUID(forKey: .uuid)
        baseVersion = try container.decodeIfPresent(Int64.self, forKey: .baseVersion)
        data = try container.decodeIfPresent(JSONObject.self, forKey: .data)
        deviceTime = try container.decodeIfPresent(ServerTimestamp.self, forKey: .deviceTime)
        switch op {
        case .create, .update:
            if data == nil {
                throw DecodingError.keyNotFound(
                    WireKey.data,
                    .init(codingPath: container.codingPath, debugDescription: "a \(op.rawValue) needs data"))
            }
        case .delete:
            if data != nil {
                throw DecodingError.dataCorruptedError(
                    forKey: .data, in: container, debugDescription: "must be absent for a delete")
            }
        }
        if op == .create, baseVersion != nil {
            throw DecodingError.dataCorruptedError(
                forKey: .baseVersion, in: container, debugDescription: "must be absent for a create")
        }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encode(seq, forKey: .seq)
        try container.encodeUUID(id, forKey: .id)
        try container.encode(op, forKey: .op)
        try container.encode(collection, forKey: .collection)
        try container.encodeUUID(uuid, forKey: .uuid)
        try container.encodeIfPresent(baseVersion, forKey: .baseVersion)
        try container.encodeIfPresent(data, forKey: .data)
        try container.encodeIfPresent(deviceTime, forKey: .deviceTime)
    }
}
