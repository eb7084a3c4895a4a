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
package struct CollectionScope: Sendable, Equatable, Codable {
    /// Records of this collection in the caller's scope.
    package var count: Int64
    /// The field that windows a capped download (e.g. `created_at`), if any.
    package var windowField: String?
    package var readOnly: Bool

    package init(count: Int64, windowField: String?, readOnly: Bool) {
        self.count = count
        self.windowField = windowField
        self.readOnly = readOnly
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: WireKey.self)
        count = try container.decode(Int64.self, forKey: .count)
        windowField = try container.decodeIfPresent(String.self, forKey: .windowField)
        readOnly = try container.decode(Bool.self, forKey: .readOnly)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encode(count, forKey: .count)
        try container.encodeIfPresent(windowField, forKey: .windowField)
        try container.encode(readOnly, forKey: .readOnly)
    }
}

/// The answer of `GET /v1/scope`.
package struct ScopeResponse: Sendable, Equatable, Codable {
    package var user: String
    package var role: Role
    package var team: String
    package var collections: [String: CollectionScope]

    package init(user: String, role: Role, team: String, collections: [String: CollectionScope]) {
        self.user = user
        self.role = role
        self.team = team
        self.collections = collections
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: WireKey.self)
        user = try container.decode(String.self, forKey: .user)
        role = try container.decode(Role.self, forKey: .role)
        team = try container.decode(String.self, forKey: .team)
        collections = try container.decode([String: CollectionScope].self, forKey: .collections)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encode(user, forKey: .user)
        try container.encode(role, forKey: .role)
        try container.encode(team, forKey: .team)
        try container.encode(collections, forKey: .collections)
    }
}

/// The answer of `GET /v1/health`.
package struct HealthResponse: Sendable, Equatable, Codable {
    package var status: String
    package var serverTime: ServerTimestamp
    /// The limits the server enforces on pushes; nil from servers that do not say.
    package var limits: Limits?
    /// The server's release (`OutpostVersion`); nil from servers that do not say.
    package var version: String?

    /// What one push may carry, as the server enforces it, so a client can
    /// size its batches and refuse at capture what would be refused later.
    package struct Limits: Sendable, Equatable, Codable {
        /// The largest request body, in bytes.
        package var maxBodyBytes: Int
        /// The most mutations in one push.
        package var maxMutations: Int
        /// The longest text field value, in UTF-8 bytes.
        package var maxFieldBytes: Int
        /// The deepest nesting of objects and arrays in a request body, the body itself counted as 1.
        package var maxDepth: Int

        package init(maxBodyBytes: Int, maxMutations: Int, maxFieldBytes: Int, maxDepth: Int) {
            self.maxBodyBytes = maxBodyBytes
            self.maxMutations = maxMutations
            self.maxFieldBytes = maxFieldBytes
            self.maxDepth = maxDepth
        }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: WireKey.self)
            maxBodyBytes = try container.decode(Int.self, forKey: .maxBodyBytes)
            maxMutations = try container.decode(Int.self, forKey: .maxMutations)
            maxFieldBytes = try container.decode(Int.self, forKey: .maxFieldBytes)
            maxDepth = try container.decode(Int.self, forKey: .maxDepth)
        }

        package func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: WireKey.self)
            try container.encode(maxBodyBytes, forKey: .maxBodyBytes)
            try container.encode(maxMutations, forKey: .maxMutations)
            try container.encode(maxFieldBytes, forKey: .maxFieldBytes)
            try container.encode(maxDepth, forKey: .maxDepth)
        }
    }

    package init(status: String = "ok", serverTime: ServerTimestamp, limits: Limits? = nil, version: String? = nil) {
        self.status = status
        self.serverTime = serverTime
        self.limits = limits
        self.version = version
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: WireKey.self)
        status = try container.decode(String.self, forKey: .status)
        serverTime = try container.decode(ServerTimestamp.self, forKey: .serverTime)
        // Health is the connectivity probe: limits it cannot read must not
        // make a reachable server look unreachable.
        limits = try? container.decodeIfPresent(Limits.self, forKey: .limits)
        version = try? container.decodeIfPresent(String.self, forKey: .version)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encode(status, forKey: .status)
        try container.encode(serverTime, forKey: .serverTime)
        try container.encodeIfPresent(limits, forKey: .limits)
        try container.encodeIfPresent(version, forKey: .version)
    }
}

/// The answer of `GET /v1/search`.
package struct SearchResponse: Sendable, Equatable, Codable {
    package var records: [WireRecord]
    package init(records: [WireRecord]) { self.records = records }

    package init(from decoder: any Decoder) throws {
        records = try decoder.container(keyedBy: WireKey.self).decode([WireRecord].self, forKey: .records)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encode(records, forKey: .records)
    }
}
