public import OutpostCore

/// A collection that is a table of the app's own PostgreSQL database, as the
/// configuration file names it (`"table"`, `"key"`, `"owner_column"` …).
/// Its fields are read from the table's columns when the server starts
/// (``MappedTable``); what the file says about fields narrows them.
public struct TableMapping: Sendable, Equatable {
    /// The collection's name on the wire.
    public var name: String
    /// The table's schema and name (`public` when the file gives none).
    public var schema: String
    public var table: String
    /// The primary key column: the record's uuid.
    public var key: String
    /// The column holding the owning user's id.
    public var ownerColumn: String
    /// The column holding the team, if the table has one; otherwise Outpost
    /// keeps the writer's team.
    public var teamColumn: String?
    /// Columns devices see but never write (besides generated columns).
    public var readOnlyColumns: [String]
    public var windowField: String?
    public var policy: ConflictPolicy
    /// Fields the file declares: a type that narrows the column's, or `required`.
    public var declaredFields: [String: FieldSchema]

    /// `schema.table`, as written in messages.
    public var qualifiedName: String { "\(schema).\(table)" }

    public init(
        name: String, table qualified: String, key: String, ownerColumn: String, teamColumn: String? = nil,
        readOnlyColumns: [String] = [], windowField: String? = nil, policy: ConflictPolicy = .mergeFields,
        declaredFields: [String: FieldSchema] = [:]
    ) throws {
        guard CollectionSchema.isValidName(name) else {
            throw ConfigError("the collection name '\(name)' must be lowercase letters, digits and _, starting with a letter")
        }
        let parts = qualified.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard (1...2).contains(parts.count), parts.allSatisfy(Self.isIdentifier) else {
            throw ConfigError(
                "the collection '\(name)' names the table '\(qualified)': give it as schema.table, each a plain SQL name")
        }
        for column in [key, ownerColumn] + (teamColumn.map { [$0] } ?? []) + readOnlyColumns where !Self.isIdentifier(column) {
            throw ConfigError("the collection '\(name)' names the column '\(column)', which is not a plain SQL name")
        }
        self.name = name
        self.schema = parts.count == 2 ? parts[0] : "public"
        self.table = parts.last!
        self.key = key
        self.ownerColumn = ownerColumn
        self.teamColumn = teamColumn
        self.readOnlyColumns = readOnlyColumns
        self.windowField = windowField
        self.policy = policy
        self.declaredFields = declaredFields
    }

    /// A name Outpost can put in generated SQL without quoting surprises:
    /// letters, digits and `_`, not starting with a digit, at most 63 bytes.
    static func isIdentifier(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard let first = bytes.first, bytes.count <= 63, !(48...57).contains(first) else { return false }
        return bytes.allSatisfy { (97...122).contains($0) || (65...90).contains($0) || (48...57).contains($0) || $0 == 95 }
    }
}

extension TableMapping: Decodable {
    enum CodingKeys: String, CodingKey, CaseIterable {
        case name, table, key, fields, policy, conflict
        case ownerColumn = "owner_column"
        case teamColumn = "team_column"
        case readOnlyColumns = "read_only_columns"
        case windowField = "window_field"
    }

    /// Every key a mapped table's definition may hold in a configuration.
    static var configurationKeys: Set<String> { Set(CodingKeys.allCases.map(\.rawValue)) }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let name = try container.decode(String.self, forKey: .name)
        guard let key = try container.decodeIfPresent(String.self, forKey: .key) else {
            throw ConfigError("the collection '\(name)' maps a table but gives no \"key\" (its primary key column)")
        }
        guard let owner = try container.decodeIfPresent(String.self, forKey: .ownerColumn) else {
            throw ConfigError("the collection '\(name)' maps a table but gives no \"owner_column\" (the owning user's id)")
        }
        let policy =
            try container.decodeIfPresent(ConflictPolicy.self, forKey: .conflict)
            ?? container.decodeIfPresent(ConflictPolicy.self, forKey: .policy) ?? .mergeFields
        try self.init(
            name: name, table: try container.decode(String.self, forKey: .table), key: key, ownerColumn: owner,
            teamColumn: try container.decodeIfPresent(String.self, forKey: .teamColumn),
            readOnlyColumns: try container.decodeIfPresent([String].self, forKey: .readOnlyColumns) ?? [],
            windowField: try container.decodeIfPresent(String.self, forKey: .windowField), policy: policy,
            declaredFields: try container.decodeIfPresent([String: FieldSchema].self, forKey: .fields) ?? [:])
    }
}

/// One entry of the configuration file's `collections`: a collection of
/// Outpost's own records, or a table of the app's database.
enum CollectionEntry: Decodable {
    case records(CollectionSchema)
    case table(TableMapping)

    private enum Probe: String, CodingKey { case table }

    init(from decoder: any Decoder) throws {
        let probe = try decoder.container(keyedBy: Probe.self)
        if probe.contains(.table) {
            self = .table(try TableMapping(from: decoder))
        } else {
            self = .records(try CollectionSchema(from: decoder))
        }
    }
}
