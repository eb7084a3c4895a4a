import Foundation

/// What a user may read and write (docs/protocol.md, "Users, roles, scope").
public enum Role: String, Sendable, Codable, CaseIterable {
    /// Reads and writes own records; keeps everything offline.
    case field
    /// Reads and writes the team's records; offline with a cap.
    case coordinator
    /// Reads and writes everything; online with a cache.
    case admin

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let role = Role(rawValue: text) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "must be one of field, coordinator, admin (got '\(text)')")
        }
        self = role
    }
}

/// One collection as the caller sees it.
public struct CollectionScope: Sendable, Equatable, Codable {
    /// Records of this collection in the caller's scope.
    public var count: Int64
    /// The field that windows a capped download (e.g. `created_at`), if any.
    public var windowField: String?
    public var readOnly: Bool

    public init(count: Int64, windowField: String?, readOnly: Bool) {
        self.count = count
        self.windowField = windowField
        self.readOnly = readOnly
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: WireKey.self)
        count = try container.decode(Int64.self, forKey: .count)
        windowField = try container.decodeIfPresent(String.self, forKey: .windowField)
        readOnly = try container.decode(Bool.self, forKey: .readOnly)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encode(count, forKey: .count)
        try container.encodeIfPresent(windowField, forKey: .windowField)
        try container.encode(readOnly, forKey: .readOnly)
    }
}

/// The answer of `GET /v1/scope`.
public struct ScopeResponse: Sendable, Equatable, Codable {
    public var user: String
    public var role: Role
    public var team: String
    public var collections: [String: CollectionScope]

    public init(user: String, role: Role, team: String, collections: [String: CollectionScope]) {
        self.user = user
        self.role = role
        self.team = team
        self.collections = collections
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: WireKey.self)
        user = try container.decode(String.self, forKey: .user)
        role = try container.decode(Role.self, forKey: .role)
        team = try container.decode(String.self, forKey: .team)
        collections = try container.decode([String: CollectionScope].self, forKey: .collections)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encode(user, forKey: .user)
        try container.encode(role, forKey: .role)
        try container.encode(team, forKey: .team)
        try container.encode(collections, forKey: .collections)
    }
}

/// The answer of `GET /v1/health`.
public struct HealthResponse: Sendable, Equatable, Codable {
    public var status: String
    public var serverTime: ServerTimestamp
    /// The limits the server enforces on pushes; nil from servers that do not say.
    public var limits: Limits?

    /// What one push may carry, as the server enforces it, so a client can
    /// size its batches and refuse at capture what would be refused later.
    public struct Limits: Sendable, Equatable, Codable {
        /// The largest request body, in bytes.
        public var maxBodyBytes: Int
        /// The most mutations in one push.
        public var maxMutations: Int
        /// The longest text field value, in UTF-8 bytes.
        public var maxFieldBytes: Int
        /// The deepest nesting of objects and arrays in a request body, the body itself counted as 1.
        public var maxDepth: Int

        public init(maxBodyBytes: Int, maxMutations: Int, maxFieldBytes: Int, maxDepth: Int) {
            self.maxBodyBytes = maxBodyBytes
            self.maxMutations = maxMutations
            self.maxFieldBytes = maxFieldBytes
            self.maxDepth = maxDepth
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: WireKey.self)
            maxBodyBytes = try container.decode(Int.self, forKey: .maxBodyBytes)
            maxMutations = try container.decode(Int.self, forKey: .maxMutations)
            maxFieldBytes = try container.decode(Int.self, forKey: .maxFieldBytes)
            maxDepth = try container.decode(Int.self, forKey: .maxDepth)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: WireKey.self)
            try container.encode(maxBodyBytes, forKey: .maxBodyBytes)
            try container.encode(maxMutations, forKey: .maxMutations)
            try container.encode(maxFieldBytes, forKey: .maxFieldBytes)
            try container.encode(maxDepth, forKey: .maxDepth)
        }
    }

    public init(status: String = "ok", serverTime: ServerTimestamp, limits: Limits? = nil) {
        self.status = status
        self.serverTime = serverTime
        self.limits = limits
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: WireKey.self)
        status = try container.decode(String.self, forKey: .status)
        serverTime = try container.decode(ServerTimestamp.self, forKey: .serverTime)
        // Health is the connectivity probe: limits it cannot read must not
        // make a reachable server look unreachable.
        limits = try? container.decodeIfPresent(Limits.self, forKey: .limits)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encode(status, forKey: .status)
        try container.encode(serverTime, forKey: .serverTime)
        try container.encodeIfPresent(limits, forKey: .limits)
    }
}

/// The answer of `GET /v1/search`.
public struct SearchResponse: Sendable, Equatable, Codable {
    public var records: [WireRecord]
    public init(records: [WireRecord]) { self.records = records }

    public init(from decoder: any Decoder) throws {
        records = try decoder.container(keyedBy: WireKey.self).decode([WireRecord].self, forKey: .records)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encode(records, forKey: .records)
    }
}
