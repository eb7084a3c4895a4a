import Foundation
import OutpostSQLite

/// The uuid's unique index, made apart from the table: a first download
/// into an empty table appends its rows with no index and has SQLite build
/// the index once at the end, sorted, instead of putting each of ~235,000
/// entries at a random place of it (`FirstDownloadKeys`).
///
/// Whoever else writes the table makes the index first (`ensureUuidIndex`),
/// so the unique key holds for every write but the download's own, which
/// keeps its repeats apart itself; a store cut off mid-download makes it
/// when it opens (`ensure`).
extension RecordTable {
    static func uuidIndexName(_ table: String) -> String { "\(table)_uuid_key" }

    var uuidIndexName: String { Self.uuidIndexName(name) }

    var uuidIndex: String {
        "CREATE UNIQUE INDEX IF NOT EXISTS \"\(uuidIndexName)\" ON \"\(name)\" (uuid);"
    }

    /// How earlier releases declared the key, in both their shapes: the
    /// unique index SQLite made for it cannot be dropped.
    static let legacyKeyDeclaration = "uuid TEXT PRIMARY KEY"

    /// Whether the table has a shape of an earlier release (remade by `ensure`).
    func hasEarlierShape() throws -> Bool {
        try TableRebuild.definition(of: name, contains: Self.legacyKeyDeclaration, in: connection)
    }

    /// Whether the uuid index is there, read from `sqlite_schema` once per
    /// schema version and kept on the connection (`SchemaFacts`): every
    /// write asks, and the query cost more than some writes.
    func hasUuidIndex() throws -> Bool {
        let version = try connection.first("PRAGMA schema_version") { $0.int64(0) } ?? 0
        if let known = connection.schemaFacts.fact(uuidIndexName, at: version) { return known }
        let exists =
            try connection.first(
                "SELECT 1 FROM sqlite_schema WHERE type = 'index' AND name = ?", [.text(uuidIndexName)]) { _ in true } ?? false
        connection.schemaFacts.note(uuidIndexName, exists, at: version)
        return exists
    }

    /// Before a write other than a first download's: a download that put the
    /// index off gives it up here (SQLite builds it from the rows in one go).
    func ensureUuidIndex() throws {
        if try hasUuidIndex() { return }
        try connection.execute(uuidIndex)
        try noteUuidIndex(true)
    }

    func isEmpty() throws -> Bool {
        try connection.first("SELECT 1 FROM \"\(name)\" LIMIT 1", [], { _ in true }) == nil
    }

    /// For a first download into the empty table: its rows then go in with
    /// no index to update.
    func dropUuidIndex() throws {
        try connection.execute("DROP INDEX IF EXISTS \"\(uuidIndexName)\"")
        try noteUuidIndex(false)
    }

    /// After this connection made or dropped the index: the schema version it moved to.
    private func noteUuidIndex(_ exists: Bool) throws {
        let version = try connection.first("PRAGMA schema_version") { $0.int64(0) } ?? 0
        connection.schemaFacts.note(uuidIndexName, exists, at: version)
    }
}
