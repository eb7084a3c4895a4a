import Foundation
import OutpostCore

/// `POST /v1/records/{collection}/{uuid}/assign` (admin only, an Outpost
/// addition): gives a record to another owner and team. Those who could see
/// it before and cannot now get `removed` in their next pull.
///
/// The new owner and team must be known to the server: a user or team that
/// holds a token (even an expired or revoked one) or already owns records.
/// A record given to a name nobody has would be visible to admins only.
struct AssignService {
    let database: any ServerDatabase
    let config: ServerConfig
    let clock: any WallClock
    /// Told whom the reassignment concerns: the scope the record left and the one it joined.
    var hub: LiveHub?
    /// What the record's history names as the writer's client: the API or the console.
    var via = "api"

    struct Assignment: Decodable {
        var owner: String
        var team: String
    }

    func assign(_ collection: String, _ uuidText: String, _ assignment: Assignment, as principal: Principal) throws
        -> WireRecord
    {
        guard principal.role == .admin else {
            throw APIError(.forbidden, "Only an administrator can reassign records.")
        }
        guard let schema = config.collections[collection], !schema.readOnly else {
            throw APIError(.notFound, "There is no writable collection named '\(collection)'.")
        }
        guard let uuid = UUID.fromWire(uuidText) else {
            throw APIError(.invalidRequest, "The record id is not a UUID.", fields: ["uuid": "must be a UUID"])
        }
        // Owner and team become SQL text: no control characters (PostgreSQL refuses NUL outright).
        let printable = TokenStore.isPrintableName
        guard printable(assignment.owner), printable(assignment.team) else {
            throw APIError(
                .invalidRequest, "Give a new owner and team: up to 200 bytes, no control characters.",
                fields: ["owner": "must be printable text", "team": "must be printable text"])
        }
        let now = ServerTimestamp(clock.now())
        var notice = CommitNotice()
        defer { hub?.committed(notice) }
        return try database.write { sql in
            var versions = try FeedVersions.begin(sql)
            guard
                var record = try sql.record(collection, uuid.wireText, forUpdate: true)
            else { throw APIError(.notFound, "No such record.") }
            guard record.owner != assignment.owner || record.team != assignment.team else { return try record.wire() }
            try Self.requireKnown(owner: assignment.owner, team: assignment.team, sql)
            if let table = config.mappedTables[collection] {
                // The app's table holds the owner: the change is made there, the copy follows.
                notice = CommitNotice()
                let stored = try Self.assign(record, in: table, assignment, versions: &versions, now: now, notice: &notice, sql)
                try versions.finish(sql)
                if let hub { try database.announce(notice.payload(origin: hub.origin), in: sql) }
                return try stored.wire()
            }
            try versions.requireNewer(than: record.version)
            // The exit gets its own feed version, before the record's new one.
            let exitVersion = try versions.next()
            try sql.execute(
                "INSERT INTO scope_exits (version, collection, uuid, old_owner, old_team, at) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    .integer(exitVersion), .text(collection), .text(uuid.wireText), .text(record.owner), .text(record.team),
                    .text(now.rawValue),
                ])
            let version = try versions.next()
            try sql.execute(
                "UPDATE records SET owner = ?, team = ?, version = ?, updated_at = ? WHERE id = ?",
                [.text(assignment.owner), .text(assignment.team), .integer(version), .text(now.rawValue), .integer(record.id)])
            try versions.finish(sql)
            notice = CommitNotice()
            notice.add(collection: collection, owner: record.owner, team: record.team)
            notice.add(collection: collection, owner: assignment.owner, team: assignment.team)
            if let hub { try database.announce(notice.payload(origin: hub.origin), in: sql) }
            let previous = record
            record.owner = assignment.owner
            record.team = assignment.team
            record.version = version
            record.updatedAt = now.rawValue
            try RecordHistory.keep(record, op: .assign, replacing: previous, user: principal.user, client: via, in: sql)
            return try record.wire()
        }
    }

    /// Gives a row of an app's table to another owner (and team, where the
    /// table has a team column): an `UPDATE` of those columns, named to the
    /// table's trigger as Outpost's own write, then the copy at a new version.
    static func assign(
        _ record: ServerRecord, in table: MappedTable, _ assignment: Assignment, versions: inout FeedVersions,
        now: ServerTimestamp, notice: inout CommitNotice, _ sql: any SQLExecutor
    ) throws -> ServerRecord {
        var assignments = ["\(table.owner.quoted) = \(TableStatements.cast(table.owner))"]
        var arguments: [SQLValue] = [.text(assignment.owner)]
        if let team = table.team {
            assignments.append("\(team.quoted) = \(TableStatements.cast(team))")
            arguments.append(.text(assignment.team))
        }
        let rows: [SQLRow]
        do {
            rows = try sql.query(
                """
                UPDATE \(table.tableSQL) AS r SET \(assignments.joined(separator: ", "))
                FROM (SELECT set_config('\(OwnTableSQL.writerSetting)', ?, true)) AS outpost_writer
                WHERE r.\(table.key.quoted) = \(TableStatements.cast(table.key))
                RETURNING \(OwnTableCopies.rowColumns(table))
                """, arguments + [.text("\(table.name):\(record.uuid)"), .text(record.uuid)])
        } catch let error as DatabaseError where TableRefusal.isRefusal(error) {
            throw APIError(.invalidRequest, "The table refused the new owner: \(error.detail.primary ?? error.message)")
        }
        guard let row = rows.first.map(OwnTableCopies.row) else { throw APIError(.notFound, "No such record.") }
        guard
            let stored = try OwnTableCopies.write(
                table, key: record.uuid, copy: record, row: row, team: row.team ?? assignment.team, by: nil,
                versions: &versions, now: now, notice: &notice, in: sql)
        else { throw APIError(.notFound, "No such record.") }
        return stored
    }

    /// Refuses an owner or team the server has never seen, changing nothing.
    static func requireKnown(owner: String, team: String, _ sql: any SQLExecutor) throws {
        let known = try sql.first(
            """
            SELECT
                EXISTS (SELECT 1 FROM tokens WHERE user_id = ?) OR EXISTS (SELECT 1 FROM records WHERE owner = ?),
                EXISTS (SELECT 1 FROM tokens WHERE team = ?) OR EXISTS (SELECT 1 FROM records WHERE team = ?)
            """,
            [.text(owner), .text(owner), .text(team), .text(team)])
        var fields: [String: String] = [:]
        if known?.bool(0) != true { fields["owner"] = "is not a user known to this server" }
        if known?.bool(1) != true { fields["team"] = "is not a team known to this server" }
        guard fields.isEmpty else {
            let unknown = fields["owner"] != nil ? "user '\(owner)'" : "team '\(team)'"
            throw APIError(
                .invalidRequest,
                "There is no \(unknown) on this server: a record can only be given to a user and team that hold a token or own records.",
                fields: fields)
        }
    }
}
