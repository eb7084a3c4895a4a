package import Foundation

/// A pull page read straight from its bytes, for the download path
/// (docs/protocol.md, "Pulling changes"; docs/benchmarks.md on where the time goes).
///
/// Nothing of a record is turned into Swift values but its numbers and flags:
/// every text field is a `TextSpan` into the page's own bytes, and a record's
/// `data` is kept as the JSON text the server sent. The store binds those
/// bytes to its statements directly, so a 235,000-record download makes no
/// String, no UUID and no dictionary per record.
package struct RawPullPage: Sendable {
    /// The body as received, followed by the text of any string that had to
    /// be unescaped or respelled: every span points in here.
    package let text: [UInt8]
    package var changes: [RawChange]
    package var cursor: PullCursor
    package var hasMore: Bool
    package var serverTime: ServerTimestamp

    /// The same page from its decoded form (tests, and records fetched
    /// online): written out as the wire JSON and read back.
    package init(_ page: PullResponse) throws {
        self = try Self.parse(try WireCoding.encode(page))
    }

    private init(text: [UInt8], changes: [RawChange], cursor: PullCursor, hasMore: Bool, serverTime: ServerTimestamp) {
        self.text = text
        self.changes = changes
        self.cursor = cursor
        self.hasMore = hasMore
        self.serverTime = serverTime
    }

    /// A field's text as a String (rare paths: catalogs, tombstones, tests).
    package func string(_ span: TextSpan) -> String {
        String(decoding: text[span.range], as: UTF8.self)
    }

    /// A change's uuid as a value.
    package func uuid(_ change: RawChange) -> UUID {
        // The parser admitted only the protocol's spelling.
        UUID.fromWire(text[change.uuid.range])!
    }

    /// Calls `body` with the page's bytes; slice them with `TextSpan.range`.
    package func withText<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try text.withUnsafeBufferPointer(body)
    }

    /// Reads a `GET /v1/pull` body strictly: a missing or mistyped field is an error.
    package static func parse(_ data: Data) throws -> RawPullPage {
        let body = [UInt8](data)
        var reader = Reader(scanner: JSONScanner(body), base: body.count)
        do {
            var changes: [RawChange] = []
            // Room for the page's changes at once, counting 256 bytes of
            // JSON each (a record with its data is more, a tombstone a
            // little less): growing the array step by step copied it into
            // fresh memory again and again, and 5,000 changes are three
            // quarters of a megabyte.
            changes.reserveCapacity(body.count / 256)
            var cursor: String?
            var hasMore: Bool?
            var serverTime: String?
            try reader.scanner.expect(UInt8(ascii: "{"))
            if !(try reader.scanner.consume(UInt8(ascii: "}"))) {
                repeat {
                    let key = try reader.scanner.readString()
                    try reader.scanner.expect(UInt8(ascii: ":"))
                    switch key {
                    case WireKey.changes.name:
                        try reader.scanner.expect(UInt8(ascii: "["))
                        if !(try reader.scanner.consume(UInt8(ascii: "]"))) {
                            repeat { changes.append(try reader.change(index: changes.count)) } while try reader.scanner.consume(
                                UInt8(ascii: ","))
                            try reader.scanner.expect(UInt8(ascii: "]"))
                        }
                    case WireKey.cursor.name: cursor = try reader.scanner.readValue().stringValue
                    case WireKey.hasMore.name: hasMore = try reader.scanner.readValue().boolValue
                    case WireKey.serverTime.name: serverTime = try reader.scanner.readValue().stringValue
                    default: _ = try reader.scanner.skipValue()
                    }
                } while try reader.scanner.consume(UInt8(ascii: ","))
                try reader.scanner.expect(UInt8(ascii: "}"))
            }
            guard reader.scanner.atEnd() else { throw WireError(path: "", problem: "is not valid JSON") }
            guard let cursor else { throw WireError(path: WireKey.cursor.name, problem: "is missing") }
            guard let hasMore else { throw WireError(path: WireKey.hasMore.name, problem: "is missing") }
            guard let serverTime, ServerTimestamp(rawValue: serverTime).date != nil else {
                throw WireError(path: WireKey.serverTime.name, problem: "must be an RFC 3339 time")
            }
            return RawPullPage(
                text: reader.extra.isEmpty ? body : body + reader.extra, changes: changes, cursor: PullCursor(rawValue: cursor),
                hasMore: hasMore, serverTime: ServerTimestamp(rawValue: serverTime))
        } catch is JSONScanner.Failure {
            throw WireError(path: "", problem: "is not valid JSON")
        }
    }

    /// Reads changes, keeping their text where it lies.
    private struct Reader {
        var scanner: JSONScanner
        /// Where `extra` will start in the page's text.
        let base: Int
        /// Unescaped or respelled text, appended after the body.
        var extra: [UInt8] = []
        /// Collection names seen so far, so each change reuses one String.
        var names: [(bytes: [UInt8], name: String)] = []

        /// The keys of a change, as bytes, in the order `change` switches on them.
        /// A change's keys, in the order `change` tells them apart.
        static let keys: [WireKey] = [.collection, .uuid, .removed, .deleted, .id, .version, .updatedAt, .owner, .team, .data, .deviceTime]
        static let keyBytes = keys.map(\.utf8)

        mutating func change(index: Int) throws -> RawChange {
            let path = "\(WireKey.changes.name)[\(index)]"
            var change = RawChange()
            var collection: String?
            var uuid: TextSpan?
            var deleted: Bool?
            var id: Int64?
            var version: Int64?
            var updatedAt: TextSpan?
            var owner: TextSpan?
            var team: TextSpan?
            try scanner.expect(UInt8(ascii: "{"))
            if !(try scanner.consume(UInt8(ascii: "}"))) {
                repeat {
                    let key = try scanner.readKey(Self.keyBytes).map { Self.keys[$0] }
                    try scanner.expect(UInt8(ascii: ":"))
                    switch key {
                    case .collection: collection = try name()
                    case .uuid: uuid = try uuidSpan(path)
                    case .removed: change.removed = try scanner.readBoolValue()
                    case .deleted: deleted = try scanner.readBoolValue()
                    case .id: id = try scanner.readIntegerValue()
                    case .version: version = try scanner.readIntegerValue()
                    case .updatedAt: updatedAt = try span()
                    case .owner: owner = try span()
                    case .team: team = try span()
                    case .deviceTime: change.deviceTime = try span()
                    case .data:
                        switch try scanner.peek() {
                        case UInt8(ascii: "n"): _ = try scanner.readValue()
                        case UInt8(ascii: "{"):
                            let range = try scanner.skipContainer()
                            change.data = TextSpan(start: range.lowerBound, count: range.count)
                        default: throw WireError(path: Self.field(path, .data), problem: "must be an object")
                        }
                    default: _ = try scanner.skipValue()
                    }
                } while try scanner.consume(UInt8(ascii: ","))
                try scanner.expect(UInt8(ascii: "}"))
            }
            guard let collection, !collection.isEmpty else { throw WireError(path: Self.field(path, .collection), problem: "is missing") }
            guard let uuid else { throw WireError(path: Self.field(path, .uuid), problem: "is missing") }
            change.collection = collection
            change.uuid = uuid
            if change.removed {
                change.deleted = true
                change.data = nil
                return change
            }
            guard let deleted else { throw WireError(path: Self.field(path, .deleted), problem: "is missing") }
            guard let id else { throw WireError(path: Self.field(path, .id), problem: "is missing") }
            guard let version else { throw WireError(path: Self.field(path, .version), problem: "is missing") }
            guard let updatedAt else { throw WireError(path: Self.field(path, .updatedAt), problem: "is missing") }
            guard let owner, let team else { throw WireError(path: Self.field(path, .owner), problem: "is missing") }
            if !deleted && change.data == nil {
                throw WireError(path: Self.field(path, .data), problem: "must be an object for a record that is not deleted")
            }
            change.deleted = deleted
            change.id = id
            change.version = version
            change.updatedAt = updatedAt
            change.owner = owner
            change.team = team
            if deleted { change.data = nil }
            return change
        }

        /// A string field (null counts as missing): in place, or unescaped into `extra`.
        private mutating func span() throws -> TextSpan? {
            if try scanner.peek() == UInt8(ascii: "n") {
                _ = try scanner.readValue()
                return nil
            }
            let (content, escaped) = try scanner.readStringSpan()
            guard escaped else { return TextSpan(start: content.lowerBound, count: content.count) }
            let start = base + extra.count
            try scanner.unescape(content, into: &extra)
            return TextSpan(start: start, count: base + extra.count - start)
        }

        /// A uuid in the protocol's spelling stays in place; another spelling
        /// of a valid UUID (uppercase, escapes) is respelled into `extra`.
        /// A change's field as an error names it: `changes[3].uuid`.
        private static func field(_ change: String, _ key: WireKey) -> String { change + "." + key.name }

        private mutating func uuidSpan(_ path: String) throws -> TextSpan {
            guard let span = try span() else { throw WireError(path: Self.field(path, .uuid), problem: "must be a UUID") }
            let inPlace = span.start < base
            if inPlace, scanner.withBytes(span.range, { UUID.isWireSpelling($0) }) { return span }
            let text = inPlace ? scanner.withBytes(span.range) { [UInt8]($0) } : [UInt8](extra[(span.start - base)...])
            guard let uuid = UUID.fromWire(text) else { throw WireError(path: Self.field(path, .uuid), problem: "must be a UUID") }
            let start = base + extra.count
            extra.append(contentsOf: uuid.wireText.utf8)
            return TextSpan(start: start, count: 36)
        }

        /// A collection name, as one shared String per name.
        private mutating func name() throws -> String? {
            guard let span = try span() else { return nil }
            if span.start < base {
                let names = self.names
                if let known = scanner.withBytes(span.range, { bytes in names.first { $0.bytes.elementsEqual(bytes) } }) {
                    return known.name
                }
            }
            let bytes = span.start < base ? scanner.withBytes(span.range) { [UInt8]($0) } : [UInt8](extra[(span.start - base)...])
            let name = String(decoding: bytes, as: UTF8.self)
            names.append((bytes, name))
            return name
        }
    }
}

/// Where a text field of a raw pull page lies in the page's `text`.
package struct TextSpan: Sendable, Equatable {
    package var start: Int
    package var count: Int

    package init(start: Int, count: Int) {
        self.start = start
        self.count = count
    }

    package var range: Range<Int> { start..<(start + count) }
}

/// One change of a raw pull page. Text fields are spans of the page's text;
/// removals carry only `collection` and `uuid`.
package struct RawChange: Sendable, Equatable {
    package var collection = ""
    /// The uuid in the protocol's lowercase spelling.
    package var uuid = TextSpan(start: 0, count: 0)
    /// Left the caller's scope: drop the local copy.
    package var removed = false
    package var deleted = false
    package var id: Int64 = 0
    package var version: Int64 = 0
    /// Server text, kept byte for byte.
    package var updatedAt = TextSpan(start: 0, count: 0)
    package var owner = TextSpan(start: 0, count: 0)
    package var team = TextSpan(start: 0, count: 0)
    /// The record's fields as the server's JSON text; nil for tombstones and removals.
    package var data: TextSpan?
    /// The device clock's time of the last write, as the device sent it (nil: not said).
    package var deviceTime: TextSpan?
}
