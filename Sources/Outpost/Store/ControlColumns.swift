import Foundation

/// The columns every collection table has beside the record's fields, in
/// the one order every statement uses: the table's definition, the select
/// list rows are read with, inserts, full-row updates and the pull's
/// upsert all come from here, so a column is added in one place.
enum ControlColumn: Int, CaseIterable {
    case uuid, serverID, syncState, serverUpdatedAt, localUpdatedAt, rejection, baseVersion, serverVersion, onServer
    case deleted, owner, team, data, deviceTime

    /// The column's SQL name.
    var name: String {
        switch self {
        case .uuid: "uuid"
        case .serverID: "server_id"
        case .syncState: "sync_state"
        case .serverUpdatedAt: "server_updated_at"
        case .localUpdatedAt: "local_updated_at"
        case .rejection: "rejection_json"
        case .baseVersion: "base_version"
        case .serverVersion: "server_version"
        case .onServer: "on_server"
        case .deleted: "deleted"
        case .owner: "owner"
        case .team: "team"
        case .data: "data"
        case .deviceTime: "device_time"
        }
    }

    /// Its type and constraints in `CREATE TABLE`.
    var declaration: String {
        switch self {
        // Unique through an index of its own (`RecordTable.uuidIndex`), which
        // a first download builds once at its end.
        case .uuid: "TEXT NOT NULL"
        case .serverID, .baseVersion, .serverVersion: "INTEGER"
        case .syncState: "TEXT NOT NULL \(Self.syncStateCheck)"
        case .serverUpdatedAt, .localUpdatedAt, .rejection, .owner, .team, .deviceTime: "TEXT"
        case .onServer, .deleted: "INTEGER NOT NULL DEFAULT 0"
        case .data: "TEXT NOT NULL"
        }
    }

    /// Columns added after the first release: a table made before gets
    /// them (`ALTER TABLE … ADD COLUMN`, so no constraint) when the store opens.
    var addedLater: Bool { self == .deviceTime }

    /// Every column, in order: the select list `RecordRow` reads.
    static let selectList = allCases.map(\.name).joined(separator: ", ")

    /// One `?` per column, for a whole-row insert.
    static let placeholders = Array(repeating: "?", count: allCases.count).joined(separator: ", ")

    /// `server_id = ?2, …` for every column but the key (`?1`), for a whole-row update.
    static let assignments = allCases.dropFirst().map { "\($0.name) = ?\($0.rawValue + 1)" }.joined(separator: ", ")

    /// The sync state's constraint, written as `=` tests joined by `OR`.
    static let syncStateCheck = MembershipCheck(column: "sync_state", values: SyncState.allCases.map(\.rawValue))

    /// The column definitions of `CREATE TABLE`.
    static let definitions = allCases.map { "\($0.name) \($0.declaration)" }.joined(separator: ",\n    ")
}
