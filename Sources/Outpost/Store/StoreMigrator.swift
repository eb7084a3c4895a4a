import Foundation
import OutpostCore
import OutpostSQLite

/// Brings a device database up to the current schema when the store opens.
enum StoreMigrator {
    /// Control columns every collection table must have.
    static let controlColumns: Set<String> = [
        "uuid", "server_id", "sync_state", "server_updated_at", "local_updated_at", "rejection_json", "base_version",
        "server_version", "on_server", "deleted", "owner", "team", "data",
    ]

    static func migrate(_ connection: SQLiteConnection, collections: [CollectionDescriptor]) throws {
        try connection.transaction {
            let version = try connection.first("PRAGMA user_version") { Int($0.int64(0)) } ?? 0
            for (index, migration) in StoreSchema.migrations.enumerated() where index >= version {
                try connection.execute(migration)
            }
            try connection.execute("PRAGMA user_version = \(StoreSchema.migrations.count)")
            for descriptor in collections {
                try connection.execute(StoreSchema.collectionTable(descriptor.name))
                let columns = Set(try connection.query("PRAGMA table_info(\"\(descriptor.name)\")") { $0.string(1) })
                let missing = controlColumns.subtracting(columns)
                guard missing.isEmpty else {
                    throw StoreError.invalidRecord(
                        "table '\(descriptor.name)' lacks the columns \(missing.sorted().joined(separator: ", "))")
                }
                for field in descriptor.indexedFields {
                    try connection.execute(StoreSchema.fieldIndex(collection: descriptor.name, field: field))
                }
                // Nothing is in flight in a process that just opened the store.
                // Only a record with an outbox entry can be sending: look there
                // rather than scan the whole table.
                try connection.run(
                    """
                    UPDATE "\(descriptor.name)" SET sync_state = 'pending'
                    WHERE uuid IN (SELECT record_uuid FROM outbox WHERE collection = ?) AND sync_state = 'sending'
                    """, [.text(descriptor.name)])
            }
        }
    }

    static let clientIDKey = "client.id"

    /// The durable client id, made the first time the database is opened.
    static func clientID(_ connection: SQLiteConnection, ids: any IDGenerator) throws -> UUID {
        try connection.transaction {
            if let text = try connection.first("SELECT value FROM kv WHERE key = ?", [.text(clientIDKey)], { $0.string(0) }),
                let id = UUID.fromWire(text)
            {
                return id
            }
            let id = ids.next()
            try connection.run("INSERT INTO kv (key, value) VALUES (?, ?)", [.text(clientIDKey), .text(id.wireText)])
            return id
        }
    }
}
