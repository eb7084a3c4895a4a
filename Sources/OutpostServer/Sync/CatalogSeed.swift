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

    /// Inserts the catalogs once, into an empty `catalogs` collection.
    static func seedIfEmpty(_ database: any ServerDatabase, config: ServerConfig, clock: any WallClock) throws {
        guard let schema = config.collections["catalogs"], schema.readOnly,
            schema.fields["catalog"] != nil, schema.fields["code"] != nil, schema.fields["name"] != nil
        else { return }
        let ids = UUIDv7Generator(clock: clock)
        let now = ServerTimestamp(clock.now()).rawValue
        try database.write { sql in
            guard try sql.first("SELECT COUNT(*) FROM records WHERE collection = 'catalogs'")?.int(0) == 0 else { return }
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
}
