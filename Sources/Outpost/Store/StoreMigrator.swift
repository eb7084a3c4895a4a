import Foundation
import OutpostCore
import OutpostSQLite

/// Brings a device database up to date when the store opens: the named
/// steps of its fixed tables (`StoreMigrations`), then each collection's
/// table (`RecordTable.ensure`), then a first cipher's sealing.
enum StoreMigrator {
    static let sealedKey = "store.sealed"

    static func migrate(
        _ connection: SQLiteConnection, collections: [CollectionDescriptor], payloads: PayloadCodec, resettingSending: Bool = true,
        progress: (@Sendable (OpenProgress) -> Void)? = nil
    ) throws {
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
                if resettingSending { try table.resetSending() }
            }
            if sealed && !marked {
                try sealExisting(connection, collections: collections, payloads: payloads, progress: progress)
                try keyValues.insert(sealedKey, "1")
                sealedNow = true
            }
        }
        // The clear text rewritten above must not stay behind in the WAL.
        if sealedNow { try connection.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
    }

    /// A store opened with a cipher for the first time: every payload
    /// written before is sealed now, so nothing stays in clear. What is
    /// there to seal is counted first, so `progress` can say how far it came.
    private static func sealExisting(
        _ connection: SQLiteConnection, collections: [CollectionDescriptor], payloads: PayloadCodec,
        progress: (@Sendable (OpenProgress) -> Void)?
    ) throws {
        let records = try collections.map { descriptor in
            let table = RecordTable(descriptor.name, connection)
            return (table, try table.clearPayloads())
        }
        let outbox = OutboxTable(connection: connection)
        let queued = try outbox.clearPayloads()
        let conflicts = ConflictLog(connection: connection, payloads: payloads)
        let reports = try ConflictLog.payloadColumns.map { ($0, try conflicts.clearPayloads($0)) }
        var counter = SealingCounter(
            total: records.reduce(0) { $0 + $1.1.count } + queued.count + reports.reduce(0) { $0 + $1.1.count }, report: progress)
        for (table, clear) in records {
            for (key, text) in clear {
                try table.setPayload(key, try payloads.stored(text))
                counter.advance()
            }
        }
        for (key, text) in queued {
            try outbox.setPayload(key, try payloads.stored(text))
            counter.advance()
        }
        for (column, clear) in reports {
            for (key, text) in clear {
                try conflicts.setPayload(column, key, try payloads.stored(text))
                counter.advance()
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

/// Counts payloads sealed and reports about a hundred times over a long
/// re-seal: often enough for a progress bar, rarely enough to cost nothing.
private struct SealingCounter {
    let total: Int
    let report: (@Sendable (OpenProgress) -> Void)?
    private(set) var sealed = 0
    private let step: Int

    init(total: Int, report: (@Sendable (OpenProgress) -> Void)?) {
        self.total = total
        self.report = report
        step = max(1, total / 100)
        if total > 0 { report?(OpenProgress(sealed: 0, total: total)) }
    }

    mutating func advance() {
        sealed += 1
        if sealed == total || sealed % step == 0 { report?(OpenProgress(sealed: sealed, total: total)) }
    }
}
