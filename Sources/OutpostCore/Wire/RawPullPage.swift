public import Foundation

/// A pull page read straight from its bytes: every record's `data` is kept
/// as the raw JSON text the server sent, never decoded, because the device
/// only stores it (PROTOCOL "GET /v1/pull"; FACTS.md on where time goes).
public struct RawPullPage: Sendable {
    public var changes: [RawChange]
    public var cursor: PullCursor
    public var hasMore: Bool
    public var serverTime: ServerTimestamp

    public init(changes: [RawChange], cursor: PullCursor, hasMore: Bool, serverTime: ServerTimestamp) {
        self.changes = changes
        self.cursor = cursor
        self.hasMore = hasMore
        self.serverTime = serverTime
    }

    /// The same page from its decoded form (tests, and callers holding a `PullResponse`).
    public init(_ page: PullResponse) throws {
        changes = try page.changes.map { change in
            switch change {
            case .removed(let collection, let uuid):
                return RawChange(collection: collection, uuid: uuid, removed: true, deleted: true)
            case .record(let record):
                return RawChange(
                    collection: record.collection, uuid: record.uuid, removed: false, deleted: record.deleted, id: record.id,
                    version: record.version, updatedAt: record.updatedAt.rawValue, owner: record.owner, team: record.team,
                    dataText: try record.data.map { try $0.jsonText() })
            }
        }
        cursor = page.cursor
        hasMore = page.hasMore
        serverTime = page.serverTime
    }

    /// Reads a `GET /v1/pull` body strictly: a missing or mistyped field is an error.
    public static func parse(_ data: Data) throws -> RawPullPage {
        var scanner = JSONScanner(data)
        do {
            var changes: [RawChange] = []
            var cursor: String?
            var hasMore: Bool?
            var serverTime: String?
            try scanner.expect(UInt8(ascii: "{"))
            if !(try scanner.consume(UInt8(ascii: "}"))) {
                repeat {
                    let key = try scanner.readString()
                    try scanner.expect(UInt8(ascii: ":"))
                    switch key {
                    case "changes":
                        try scanner.expect(UInt8(ascii: "["))
                        if !(try scanner.consume(UInt8(ascii: "]"))) {
                            repeat { changes.append(try RawChange.read(&scanner, index: changes.count)) } while try scanner.consume(
                                UInt8(ascii: ","))
                            try scanner.expect(UInt8(ascii: "]"))
                        }
                    case "cursor": cursor = try scanner.readValue().stringValue
                    case "has_more": hasMore = try scanner.readValue().boolValue
                    case "server_time": serverTime = try scanner.readValue().stringValue
                    default: _ = try scanner.skipValue()
                    }
                } while try scanner.consume(UInt8(ascii: ","))
                try scanner.expect(UInt8(ascii: "}"))
            }
            guard scanner.atEnd() else { throw WireError(path: "", problem: "is not valid JSON") }
            guard let cursor else { throw WireError(path: "cursor", problem: "is missing") }
            guard let hasMore else { throw WireError(path: "has_more", problem: "is missing") }
            guard let serverTime, ServerTimestamp(rawValue: serverTime).date != nil else {
                throw WireError(path: "server_time", problem: "must be an RFC 3339 time")
            }
            return RawPullPage(
                changes: changes, cursor: PullCursor(rawValue: cursor), hasMore: hasMore,
                serverTime: ServerTimestamp(rawValue: serverTime))
        } catch is JSONScanner.Failure {
            throw WireError(path: "", problem: "is not valid JSON")
        }
    }
}

/// One change of a raw pull page.
public struct RawChange: Sendable, Equatable {
    public var collection: String
    public var uuid: UUID
    /// Left the caller's scope: drop the local copy.
    public var removed: Bool
    public var deleted: Bool
    public var id: Int64
    public var version: Int64
    /// Server text, kept byte for byte.
    public var updatedAt: String
    public var owner: String
    public var team: String
    /// The record's fields as the server's JSON text; nil for tombstones and removals.
    public var dataText: String?
    /// `uuid` in the protocol's spelling, kept from the page so it is not formatted again.
    public var uuidText: String

    public init(
        collection: String, uuid: UUID, removed: Bool, deleted: Bool, id: Int64 = 0, version: Int64 = 0,
        updatedAt: String = "", owner: String = "", team: String = "", dataText: String? = nil
    ) {
        self.collection = collection
        self.uuid = uuid
        self.removed = removed
        self.deleted = deleted
        self.id = id
        self.version = version
        self.updatedAt = updatedAt
        self.owner = owner
        self.team = team
        self.dataText = dataText
        self.uuidText = uuid.wireText
    }

    /// The keys of a change, as bytes, in the order `read` switches on them.
    static let keys: [[UInt8]] = ["collection", "uuid", "removed", "deleted", "id", "version", "updated_at", "owner", "team", "data"]
        .map { Array($0.utf8) }

    static func read(_ scanner: inout JSONScanner, index: Int) throws -> RawChange {
        let path = "changes[\(index)]"
        var collection: String?
        var uuid: (uuid: UUID, text: String)?
        var removed = false
        var deleted: Bool?
        var id: Int64?
        var version: Int64?
        var updatedAt: String?
        var owner: String?
        var team: String?
        var dataText: String?
        try scanner.expect(UInt8(ascii: "{"))
        if !(try scanner.consume(UInt8(ascii: "}"))) {
            repeat {
                let key = try scanner.readKey(keys)
                try scanner.expect(UInt8(ascii: ":"))
                switch key {
                case 0: collection = try scanner.readStringValue()
                case 1:
                    guard let value = try scanner.readUUIDValue() else {
                        throw WireError(path: "\(path).uuid", problem: "must be a UUID")
                    }
                    uuid = value
                case 2: removed = try scanner.readBoolValue()
                case 3: deleted = try scanner.readBoolValue()
                case 4: id = try scanner.readIntegerValue()
                case 5: version = try scanner.readIntegerValue()
                case 6: updatedAt = try scanner.readStringValue()
                case 7: owner = try scanner.readStringValue()
                case 8: team = try scanner.readStringValue()
                case 9:
                    if try scanner.peek() == UInt8(ascii: "n") {
                        _ = try scanner.readStringValue()
                    } else {
                        guard try scanner.peek() == UInt8(ascii: "{") else {
                            throw WireError(path: "\(path).data", problem: "must be an object")
                        }
                        dataText = scanner.text(try scanner.skipContainer())
                    }
                default: _ = try scanner.skipValue()
                }
            } while try scanner.consume(UInt8(ascii: ","))
            try scanner.expect(UInt8(ascii: "}"))
        }
        guard let collection, !collection.isEmpty else { throw WireError(path: "\(path).collection", problem: "is missing") }
        guard let uuid else { throw WireError(path: "\(path).uuid", problem: "is missing") }
        if removed { return RawChange(collection: collection, uuid: uuid.uuid, removed: true, deleted: true) }
        guard let deleted else { throw WireError(path: "\(path).deleted", problem: "is missing") }
        guard let id else { throw WireError(path: "\(path).id", problem: "is missing") }
        guard let version else { throw WireError(path: "\(path).version", problem: "is missing") }
        guard let updatedAt else { throw WireError(path: "\(path).updated_at", problem: "is missing") }
        guard let owner, let team else { throw WireError(path: "\(path).owner", problem: "is missing") }
        if !deleted && dataText == nil {
            throw WireError(path: "\(path).data", problem: "must be an object for a record that is not deleted")
        }
        var change = RawChange(
            collection: collection, uuid: uuid.uuid, removed: false, deleted: deleted, id: id, version: version,
            updatedAt: updatedAt, owner: owner, team: team, dataText: deleted ? nil : dataText)
        change.uuidText = uuid.text.lowercased()
        return change
    }
}
