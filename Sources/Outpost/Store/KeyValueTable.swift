import Foundation
package import OutpostSQLite

/// The `kv` table: the store's small named values (the client id, the pull
/// cursor, the queue's counters, settings kept across launches).
package struct KeyValueTable {
    let connection: SQLiteConnection

    package init(connection: SQLiteConnection) { self.connection = connection }

    package static func create(in connection: SQLiteConnection) throws {
        try connection.execute(
            """
            CREATE TABLE kv (
                key   TEXT PRIMARY KEY,
                value TEXT NOT NULL
            ) WITHOUT ROWID;
            """)
    }

    package func value(_ key: String) throws -> String? {
        try connection.first("SELECT value FROM kv WHERE key = ?", [.text(key)]) { $0.string(0) }
    }

    package func contains(_ key: String) throws -> Bool {
        try connection.first("SELECT 1 FROM kv WHERE key = ?", [.text(key)], { _ in true }) == true
    }

    /// Every value whose key starts with `prefix`, by key.
    package func values(prefix: String) throws -> [String: String] {
        var values: [String: String] = [:]
        try connection.forEach("SELECT key, value FROM kv WHERE key >= ? AND key < ?", [.text(prefix), .text(prefix + "\u{FFFF}")]) {
            values[$0.string(0)] = $0.string(1)
        }
        return values
    }

    /// Sets a value, replacing any before.
    package func set(_ key: String, _ value: String) throws {
        try connection.run(
            "INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [.text(key), .text(value)])
    }

    /// Adds a value whose key is not there yet (throws when it is).
    package func insert(_ key: String, _ value: String) throws {
        try connection.run("INSERT INTO kv (key, value) VALUES (?, ?)", [.text(key), .text(value)])
    }

    package func remove(_ key: String) throws {
        try connection.run("DELETE FROM kv WHERE key = ?", [.text(key)])
    }

    /// Empties the table but for one key.
    package func removeAll(except key: String) throws {
        try connection.run("DELETE FROM kv WHERE key <> ?", [.text(key)])
    }
}
