package import Foundation

/// The server's position in its change feed. Opaque: only the server makes
/// one, the client stores it and sends it back.
package struct PullCursor: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    package let rawValue: String
    package init(rawValue: String) { self.rawValue = rawValue }

    package init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    package var description: String { rawValue }
}

/// One entry of a pull page.
package enum PullChange: Sendable, Equatable, Codable {
    /// A record in its latest state; a tombstone when `deleted` is true.
    case record(WireRecord)
    /// The record left the caller's scope: drop the local copy.
    case removed(collection: String, uuid: UUID)

    package var collection: String {
        switch self {
        case .record(let record): return record.collection
        case .removed(let collection, _): return collection
        }
    }

    package var uuid: UUID {
        switch self {
        case .record(let record): return record.uuid
        case .removed(_, let uuid): return uuid
        }
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: WireKey.self)
        if try container.decodeIfPresent(Bool.self, forKey: .removed) == true {
            self = .removed(
                collection: try container.decodeNonEmpty(.collection), uuid: try container.decodeUUID(forKey: .uuid))
        } else {
            self = .record(try WireRecord(from: decoder))
        }
    }

    package func encode(to encoder: any Encoder) throws {
        switch self {
        case .record(let record):
            try record.encode(to: encoder)
        case .removed(let collection, let uuid):
            var container = encoder.container(keyedBy: WireKey.self)
            try container.encode(collection, forKey: .collection)
            try container.encodeUUID(uuid, forKey: .uuid)
            try container.encode(true, forKey: .deleted)
            try container.encode(true, forKey: .removed)
        }
    }
}

/// The answer of `GET /v1/pull`.
package struct PullResponse: Sendable, Equatable, Codable {
    package var changes: [PullChange]
    package var cursor: PullCursor
    package var hasMore: Bool
    package var serverTime: ServerTimestamp

    package init(changes: [PullChange], cursor: PullCursor, hasMore: Bool, serverTime: ServerTimestamp) {
        self.changes = changes
        self.cursor = cursor
        self.hasMore = hasMore
        self.serverTime = serverTime
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: WireKey.self)
        changes = try container.decode([PullChange].self, forKey: .changes)
        cursor = try container.decode(PullCursor.self, forKey: .cursor)
        hasMore = try container.decode(Bool.self, forKey: .hasMore)
        serverTime = try container.decode(ServerTimestamp.self, forKey: .serverTime)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encode(changes, forKey: .changes)
        try container.encode(cursor, forKey: .cursor)
        try container.encode(hasMore, forKey: .hasMore)
        try container.encode(serverTime, forKey: .serverTime)
    }
}
