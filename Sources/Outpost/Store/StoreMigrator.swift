import Foundation
import OutpostCore
import OutpostSQLite

/// Brings a device database up to date when the store opens: the named
/// steps of its fixed tables (`StoreMigrations`), then each collection's
/// table (`RecordTable.ensure`), then a first cipher's sealing.
enum StoreMigrator {
    static let sealedKey = "store.sealed"

    static func migrate(_ connection: SQLiteConnection, collections: [CollectionDescriptor], payloads: PayloadCodec) throws {
        let sealed = payloads.seals
        if sealed {
            // Space freed by rewritten or deleted payloads is zeroed, not left in clear.
            try connection.execute("PRAGMA secure_delete = ON")
        }
        var sealedNow = false
        try connection.transaction {
            try StoreMigrations.migrate(connection)
            let keyValues = KeyValueTable(connection: connection)
            // A store whose payloads are sealed opens only with its cipher.
            let marked = try keyValues.value(sealedKey) == "1"
            if marked && !sealed { throw StoreError.encrypted }
            for descriptor in collections {
                let table = RecordTable(descriptor.name, connection)
                try table.ensure(indexedFields: descriptor.indexedFields, sealed: sealed)
                try table.resetSending()
            }
            if sealed && !marked {
                try sealExisting(connection, collections: collections, payloads: payloads)
                try keyValues.insert(sealedKey, "1")
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
        for descriptor in collections {
            let table = RecordTable(descriptor.name, connection)
            for (key, text) in try table.clearPayloads() { try table.setPayload(key, try payloads.stored(text)) }
        }
        let outbox = OutboxTable(connection: connection)
        for (key, text) in try outbox.clearPayloads() { try outbox.setPayload(key, try payloads.stored(text)) }
        let conflicts = ConflictLog(connection: connection, payloads: payloads)
        for column in ConflictLog.payloadColumns {
            for (key, text) in try conflicts.clearPayloads(column) {
                try conflicts.setPayload(column, key, try payloads.stored(text))
            }
        }
    }

    static let clientIDKey = "client.id"

    /// The durable client id, made the first time the database is opened.
    static func clientID(_ connection: SQLiteConnection, ids: any IDGenerator) throws -> UUID {
        try connection.transaction {
            let keyValues = KeyValueTable(connection: connection)
            if let text = try keyValues.value(clientIDKey), let id = UUID.fromWire(text) {
                return id
            }
            let id = ids.next()
            try keyValues.insert(clientIDKey, id.wireText)
            return id
        }
    }
}
