import Foundation
import OutpostCore
import OutpostSQLite

/// Brings a device database up to the current schema when the store opens.
enum StoreMigrator {
    /// Control columns every collection table must have.
    static let controlColumns = Set(ControlColumn.allCases.map(\.name))

    /// Control columns added after the first release, with their type: a
    /// table made before gets them when the store opens.
    static let addedColumns = ControlColumn.allCases.filter(\.addedLater).map { (name: $0.name, type: $0.declaration) }

    static let sealedKey = "store.sealed"

    static func migrate(_ connection: SQLiteConnection, collections: [CollectionDescriptor], payloads: PayloadCodec) throws {
        let sealed = payloads.seals
        if sealed {
            // Space freed by rewritten or deleted payloads is zeroed, not left in clear.
            try connection.execute("PRAGMA secure_delete = ON")
        }
        var sealedNow = false
        try connection.transaction {
            let version = try connection.first("PRAGMA user_version") { Int($0.int64(0)) } ?? 0
            for (index, migration) in StoreSchema.migrations.enumerated() where index >= version {
                try connection.execute(migration)
            }
            try connection.execute("PRAGMA user_version = \(StoreSchema.migrations.count)")
            try MembershipCheck.upgrade("outbox", checks: [StoreSchema.outboxOpCheck], in: connection)
            try MembershipCheck.upgrade("blobs", checks: [StoreSchema.blobUploadCheck], in: connection)
            // A store whose payloads are sealed opens only with its cipher.
            let marked = try connection.first("SELECT value FROM kv WHERE key = ?", [.text(sealedKey)]) { $0.string(0) } == "1"
            if marked && !sealed { throw StoreError.encrypted }
            for descriptor in collections {
                try connection.execute(StoreSchema.collectionTable(descriptor.name))
                try MembershipCheck.upgrade(descriptor.name, checks: [ControlColumn.syncStateCheck], in: connection)
                var columns = Set(try connection.query("PRAGMA table_info(\"\(descriptor.name)\")") { $0.string(1) })
                for added in addedColumns where !columns.contains(added.name) {
                    try connection.execute("ALTER TABLE \"\(descriptor.name)\" ADD COLUMN \(added.name) \(added.type)")
                    columns.insert(added.name)
                }
                let missing = controlColumns.subtracting(columns)
                guard missing.isEmpty else {
                    throw StoreError.invalidRecord(
                        "table '\(descriptor.name)' lacks the columns \(missing.sorted().joined(separator: ", "))")
                }
                for field in descriptor.indexedFields {
                    // An index over JSON fields cannot read sealed data (and would
                    // keep the fields in clear): none while payloads are sealed.
                    try connection.execute(
                        sealed
                            ? StoreSchema.dropFieldIndex(collection: descriptor.name, field: field)
                            : StoreSchema.fieldIndex(collection: descriptor.name, field: field))
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
            if sealed && !marked {
                try sealExisting(connection, collections: collections, payloads: payloads)
                try connection.run("INSERT INTO kv (key, value) VALUES (?, '1')", [.text(sealedKey)])
                sealedNow = true
            }
        }
        // The clear text rewritten above must not stay behind in the WAL.
        if sealedNow { try connection.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
    }

    /// A store opened with a cipher for the first time: every payload
    /// written before is sealed now, so nothing stays in clear.
    private static func sealExisting(
        _ connection: SQLiteConnection, collections: [CollectionDescriptor], payloads: PayloadCodec
    ) throws {
        var targets = collections.map { (table: $0.name, key: "uuid", columns: ["data"]) }
        targets.append((table: "outbox", key: "entry", columns: ["data"]))
        targets.append((table: "conflicts", key: "id", columns: ["local_change", "server_record"]))
        for target in targets {
            for column in target.columns {
                let rows = try connection.query(
                    "SELECT \(target.key), \(column) FROM \"\(target.table)\" WHERE typeof(\(column)) = 'text'"
                ) { ($0.value(0), $0.string(1)) }
                for (key, text) in rows {
                    try connection.run(
                        "UPDATE \"\(target.table)\" SET \(column) = ? WHERE \(target.key) = ?", [try payloads.stored(text), key])
                }
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
