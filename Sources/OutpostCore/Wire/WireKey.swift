/// The JSON keys of the sync protocol (docs/protocol.md), each spelled once.
///
/// Every path that reads or writes a wire body takes its keys from here: the
/// Codable types key their containers with it, and the byte-level readers and
/// writers (push bodies, pull pages, the live stream) use its UTF-8 forms,
/// built once from the same spelling. A key therefore cannot be written one
/// way by one path and read another way by the next.
///
/// The raw value is only the case's position: the index of its precomputed
/// bytes, so a writer's hot loop looks them up without hashing.
package enum WireKey: Int, CaseIterable, Sendable {
    // A page of changes (`GET /v1/pull`, the live stream's `changes` events).
    case changes, cursor, hasMore, serverTime
    // A record, and a removal from the caller's scope.
    case collection, uuid, id, version, updatedAt, deleted, removed, owner, team, data, deviceTime
    // A search's answer (`GET /v1/search`).
    case records
    // A push (`POST /v1/push`) and its answer.
    case clientID, mutations, seq, op, baseVersion, results, status, record, originalStatus, code, errors, lastSeq
    // An error body.
    case error, message, fields, requestID, seqs
    // The caller's scope (`GET /v1/scope`).
    case user, role, collections, count, windowField, readOnly
    // The health answer's limits.
    case limits, maxBodyBytes, maxMutations, maxFieldBytes, maxDepth
    // An attachment field's value.
    case sha256, size, contentType

    /// The key as the wire spells it.
    @inlinable package var name: String {
        switch self {
        case .changes: "changes"
        case .cursor: "cursor"
        case .hasMore: "has_more"
        case .serverTime: "server_time"
        case .collection: "collection"
        case .uuid: "uuid"
        case .id: "id"
        case .version: "version"
        case .updatedAt: "updated_at"
        case .deleted: "deleted"
        case .removed: "removed"
        case .owner: "owner"
        case .team: "team"
        case .data: "data"
        case .deviceTime: "device_time"
        case .records: "records"
        case .clientID: "client_id"
        case .mutations: "mutations"
        case .seq: "seq"
        case .op: "op"
        case .baseVersion: "base_version"
        case .results: "results"
        case .status: "status"
        case .record: "record"
        case .originalStatus: "original_status"
        case .code: "code"
        case .errors: "errors"
        case .lastSeq: "last_seq"
        case .error: "error"
        case .message: "message"
        case .fields: "fields"
        case .requestID: "request_id"
        case .seqs: "seqs"
        case .limits: "limits"
        case .user: "user"
        case .role: "role"
        case .collections: "collections"
        case .count: "count"
        case .windowField: "window_field"
        case .readOnly: "read_only"
        case .maxBodyBytes: "max_body_bytes"
        case .maxMutations: "max_mutations"
        case .maxFieldBytes: "max_field_bytes"
        case .maxDepth: "max_depth"
        case .sha256: "sha256"
        case .size: "size"
        case .contentType: "content_type"
        }
    }

    /// The key's name alone, as `JSONScanner.readKey` compares it.
    @inlinable package var utf8: [UInt8] { Self.forms[rawValue].utf8 }
    /// `"key":`, a member's start where no comma or brace comes before.
    @inlinable package var quoted: [UInt8] { Self.forms[rawValue].quoted }
    /// `{"key":`, an object's first member.
    @inlinable package var opening: [UInt8] { Self.forms[rawValue].opening }
    /// `,"key":`, any member after the first.
    @inlinable package var member: [UInt8] { Self.forms[rawValue].member }

    /// `,"key":true` or `,"key":false`, whole: a flag is written in one append.
    @inlinable package func member(_ flag: Bool) -> [UInt8] {
        flag ? Self.forms[rawValue].memberTrue : Self.forms[rawValue].memberFalse
    }

    /// The bytes of every key, made once, in case order.
    @usableFromInline static let forms: [Forms] = allCases.map(Forms.init)

    @usableFromInline struct Forms: Sendable {
        @usableFromInline let utf8: [UInt8]
        @usableFromInline let quoted: [UInt8]
        @usableFromInline let opening: [UInt8]
        @usableFromInline let member: [UInt8]
        @usableFromInline let memberTrue: [UInt8]
        @usableFromInline let memberFalse: [UInt8]

        init(_ key: WireKey) {
            utf8 = Array(key.name.utf8)
            quoted = [UInt8(ascii: "\"")] + utf8 + Array("\":".utf8)
            opening = [UInt8(ascii: "{")] + quoted
            member = [UInt8(ascii: ",")] + quoted
            memberTrue = member + Array("true".utf8)
            memberFalse = member + Array("false".utf8)
        }
    }

    /// The key of a wire spelling; nil for a name the protocol does not have.
    package init?(name: String) {
        guard let key = Self.byName[name] else { return nil }
        self = key
    }

    private static let byName = Dictionary(uniqueKeysWithValues: allCases.map { ($0.name, $0) })
}

/// Codable types key their containers with `WireKey` itself, so a coding
/// path names a field by its wire spelling (`mutations[2].base_version`).
extension WireKey: CodingKey {
    package var stringValue: String { name }
    package init?(stringValue: String) { self.init(name: stringValue) }
    package var intValue: Int? { nil }
    package init?(intValue: Int) { nil }
}

/// The names of the live stream's events (the `event:` lines of
/// `GET /v1/stream`), shared by the server that writes them and the client
/// that reads them.
package enum LiveEventName: String, CaseIterable, Sendable {
    case changes, heartbeat, error
}
