import Foundation
import OutpostCore
package import OutpostSQLite

/// The `catalogs` table: read-only reference data, every catalog in one
/// table, written only by pulls.
package struct CatalogTable {
    let connection: SQLiteConnection

    package init(connection: SQLiteConnection) { self.connection = connection }

    package static func create(in connection: SQLiteConnection) throws {
        try connection.execute(
            """
            -- Read-only reference data: every catalog in one table.
            CREATE TABLE catalogs (
                uuid              TEXT PRIMARY KEY,
                catalog           TEXT NOT NULL,
                code              TEXT NOT NULL,
                name              TEXT NOT NULL,
                data              TEXT NOT NULL,
                server_id         INTEGER,
                server_version    INTEGER,
                server_updated_at TEXT
            );
            CREATE INDEX catalogs_by_catalog ON catalogs (catalog, code);
            """)
    }

    /// Entries of one catalog, by code.
    package func entries(_ catalog: String) throws -> [CatalogEntry] {
        try connection.query(
            "SELECT uuid, catalog, code, name, data FROM catalogs WHERE catalog = ? ORDER BY code", [.text(catalog)]
        ) { row in
            CatalogEntry(
                uuid: UUID.fromWire(row.string(0)) ?? UUID(), catalog: row.string(1), code: row.string(2),
                name: row.string(3), data: (try? JSONObject.parseObject(row.string(4))) ?? [:])
        }
    }

    /// Stores the server's copy of an entry (`text`: its data as sent).
    package func upsert(uuid: String, data: JSONObject, text: String, serverID: Int64, version: Int64, updatedAt: String) throws {
        try connection.run(
            """
            INSERT INTO catalogs (uuid, catalog, code, name, data, server_id, server_version, server_updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (uuid) DO UPDATE SET catalog = excluded.catalog, code = excluded.code, name = excluded.name,
                data = excluded.data, server_id = excluded.server_id, server_version = excluded.server_version,
                server_updated_at = excluded.server_updated_at
            """,
            [
                .text(uuid), .text(data["catalog"]?.stringValue ?? ""), .text(data["code"]?.stringValue ?? ""),
                .text(data["name"]?.stringValue ?? ""), .text(text), .integer(serverID), .integer(version),
                .text(updatedAt),
            ])
    }

    package func remove(uuid: String) throws {
        try connection.run("DELETE FROM catalogs WHERE uuid = ?", [.text(uuid)])
    }

    package func count() throws -> Int {
        try connection.first("SELECT count(*) FROM catalogs") { Int($0.int64(0)) } ?? 0
    }
}
