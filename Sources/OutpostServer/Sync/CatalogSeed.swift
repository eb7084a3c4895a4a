import Foundation
import OutpostCore

/// The reference data the built-in `catalogs` collection ships with, so a
/// fresh server (and the demo) has real-looking catalogs to download.
enum CatalogSeed {
    static let entries: [(catalog: String, code: String, name: String)] = [
        ("visit_outcome", "done", "Visit completed"),
        ("visit_outcome", "not_home", "Nobody at home"),
        ("visit_outcome", "refused", "Declined to take part"),
        ("visit_outcome", "moved", "Moved away"),
        ("visit_outcome", "revisit", "Come back later"),
        ("document_type", "national_id", "National identity card"),
        ("document_type", "passport", "Passport"),
        ("document_type", "driving_licence", "Driving licence"),
        ("document_type", "residence_permit", "Residence permit"),
        ("region", "north", "North district"),
        ("region", "south", "South district"),
        ("region", "east", "East district"),
        ("region", "west", "West district"),
        ("region", "centre", "Historic centre"),
        ("language", "es", "Spanish"),
        ("language", "it", "Italian"),
        ("language", "pt", "Portuguese"),
        ("language", "ru", "Russian"),
    ]

    /// Inserts the catalogs once, into an empty `catalogs` collection, however
    /// many servers start at once.
    static func seedIfEmpty(_ database: any ServerDatabase, config: ServerConfig, clock: any WallClock) throws {
        guard let schema = config.collections["catalogs"], schema.readOnly,
            schema.fields["catalog"] != nil, schema.fields["code"] != nil, schema.fields["name"] != nil
        else { return }
        let ids = UUIDv7Generator(clock: clock)
        let now = ServerTimestamp(clock.now()).rawValue
        try database.write { sql in
            // Servers starting together on one PostgreSQL each saw an empty
            // collection and seeded it (three servers, three copies): the
            // migrations' lock makes the count and the inserts one step.
            // (SQLite's write transactions are already one at a time.)
            if sql.dialect == .postgres { _ = try sql.query(PostgresDatabase.writeLockStatement, []) }
            guard try sql.first("SELECT COUNT(*) FROM records WHERE collection = 'catalogs'")?.int(0) == 0 else {
                try removeSeededCopies(sql, now: now)
                return
            }
            var versions = try FeedVersions.begin(sql)
            for entry in entries {
                let version = try versions.next()
                let data: JSONObject = ["catalog": .string(entry.catalog), "code": .string(entry.code), "name": .string(entry.name)]
                try sql.execute(
                    """
                    INSERT INTO records (collection, uuid, version, updated_at, deleted, owner, team, created_by_user,
                        created_by_client, window_at, data)
                    VALUES ('catalogs', ?, ?, ?, 0, 'system', 'system', 'system', 'seed', NULL, ?)
                    """,
                    [.text(ids.next().wireText), .integer(version), .text(now), .text(try data.jsonText())])
            }
            if let written = versions.issued { try SearchIndex.addRecords(at: written, in: sql) }
            try versions.finish(sql)
        }
    }

    /// Deployments whose servers started together before seeding took a
    /// lock hold two or three copies of each seeded entry: every copy but
    /// the first of each (catalog, code) becomes a tombstone, so devices
    /// that downloaded the copies drop them at their next pull. Entries an
    /// administrator added are never touched.
    static func removeSeededCopies(_ sql: any SQLExecutor, now: String) throws {
        let seeded = try sql.query(
            """
            SELECT \(ServerRecord.columns) FROM records
            WHERE collection = 'catalogs' AND created_by_client = 'seed' AND deleted = 0 ORDER BY id
            """, [])
        var kept = Set<String>()
        var copies: [ServerRecord] = []
        for row in seeded {
            let record = ServerRecord(row)
            let object = try record.dataText.map { try JSONObject.parseObject($0) } ?? [:]
            let entry = "\(object["catalog"]?.stringValue ?? "")\u{1F}\(object["code"]?.stringValue ?? "")"
            if !kept.insert(entry).inserted { copies.append(record) }
        }
        guard !copies.isEmpty else { return }
        var versions = try FeedVersions.begin(sql)
        for previous in copies {
            var tombstone = previous
            tombstone.version = try versions.next()
            tombstone.updatedAt = now
            tombstone.deleted = true
            tombstone.dataText = nil
            tombstone.deviceTime = nil
            try sql.execute(
                "UPDATE records SET version = ?, updated_at = ?, deleted = 1, window_at = NULL, data = NULL, device_time = NULL WHERE id = ?",
                [.integer(tombstone.version), .text(now), .integer(previous.id)])
            try SearchIndex.replace(id: previous.id, old: previous.dataText, new: nil, in: sql)
            try RecordHistory.keep(tombstone, op: .delete, replacing: previous, user: "system", client: "seed", in: sql)
        }
        try versions.finish(sql)
    }
}
