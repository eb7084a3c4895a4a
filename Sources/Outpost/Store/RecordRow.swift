import Foundation
import OutpostCore
import OutpostSQLite

/// One row of a collection table, as the store and the outbox read it.
struct RecordRow {
    var collection: String
    var uuid: UUID
    var serverID: Int64?
    var syncState: SyncState
    var serverUpdatedAt: ServerTimestamp?
    var localUpdatedAt: String?
    var rejection: Rejection?
    var baseVersion: Int64?
    var serverVersion: Int64?
    var onServer: Bool
    var deleted: Bool
    var owner: String?
    var team: String?
    var data: JSONObject
    /// The device clock's time of the last write: this device's for a local
    /// edit, the writing device's (as the server keeps it) for a server copy.
    var deviceTime: ServerTimestamp? = nil
    /// `data` as the row stores it (opened, when sealed), for a row read
    /// from the store: an update compares it with a queued create's text
    /// instead of reading that create's data again.
    var storedText: String? = nil

    /// The select list rows are read with (see `ControlColumn`).
    static let columns = ControlColumn.selectList
}

extension RecordRow {
    /// Reads a row selected with `RecordRow.columns`.
    init(collection: String, row: SQLiteRow, payloads: PayloadCodec) throws {
        self.collection = collection
        func at(_ column: ControlColumn) -> Int { column.rawValue }
        let reader = RowReader(table: collection, key: row.string(at(.uuid)))
        uuid = try reader.uuid(row.string(at(.uuid)), "uuid")
        serverID = row.optionalInt64(at(.serverID))
        let stateText = row.string(at(.syncState))
        guard let state = SyncState(rawValue: stateText) else { throw reader.damaged("sync state '\(stateText)' is unknown") }
        syncState = state
        serverUpdatedAt = row.optionalString(at(.serverUpdatedAt)).map(ServerTimestamp.init(rawValue:))
        localUpdatedAt = row.optionalString(at(.localUpdatedAt))
        rejection = try reader.reading("rejection") {
            try row.optionalString(at(.rejection)).map { try WireCoding.decode(Rejection.self, from: Data($0.utf8)) }
        }
        baseVersion = row.optionalInt64(at(.baseVersion))
        serverVersion = row.optionalInt64(at(.serverVersion))
        onServer = row.int64(at(.onServer)) != 0
        deleted = row.int64(at(.deleted)) != 0
        owner = row.optionalString(at(.owner))
        team = row.optionalString(at(.team))
        let text = try reader.reading("data") { try payloads.text(row, at(.data)) }
        data = try reader.object(text ?? "{}", "data")
        deviceTime = row.optionalString(at(.deviceTime)).map(ServerTimestamp.init(rawValue:))
        storedText = text
    }

    func localRecord<Value>(_ value: Value) -> LocalRecord<Value> {
        LocalRecord(
            collection: collection, uuid: uuid, value: value, syncState: syncState, serverID: serverID,
            serverVersion: serverVersion, serverUpdatedAt: serverUpdatedAt,
            localUpdatedAt: localUpdatedAt.flatMap { ServerTimestamp(rawValue: $0).date }, deviceTime: deviceTime?.date,
            rejection: rejection, owner: owner, team: team)
    }
}

/// The collection tables as store writes, the outbox and settlement use
/// them: rows in and out through each collection's `RecordTable`, payloads
/// sealed and opened on the way, damaged rows noted.
struct RecordTables {
    let connection: SQLiteConnection
    let payloads: PayloadCodec
    /// Rows readers stepped over because they could not be read.
    var damage = DamageLog()

    func table(_ collection: String) -> RecordTable { RecordTable(collection, connection) }

    func load(_ collection: String, _ uuid: UUID) throws -> RecordRow? {
        try table(collection).row(uuid) { try RecordRow(collection: collection, row: $0, payloads: payloads) }
    }

    func exists(_ collection: String, _ uuid: UUID) throws -> Bool {
        try table(collection).contains(uuid)
    }

    /// Inserts a new row (`dataText`: its data's JSON, when the caller
    /// already wrote it). A row with the same uuid is reported as
    /// `StoreError.recordExists`: the primary key decides, no lookup first.
    func insert(_ row: RecordRow, dataText: String? = nil) throws {
        do {
            try table(row.collection).insert(try values(row, dataText: dataText))
        } catch let error as SQLiteError where Self.keyConflicts.contains(error.extendedCode) {
            throw StoreError.recordExists(collection: row.collection, uuid: row.uuid)
        }
    }

    /// SQLITE_CONSTRAINT_UNIQUE (the uuid's own index) and
    /// SQLITE_CONSTRAINT_PRIMARYKEY (the key of tables made by earlier releases).
    private static let keyConflicts: Set<Int32> = [2067, 1555]

    /// Writes every column of an existing row (`dataText`: the data's
    /// JSON, when the caller already wrote it).
    func save(_ row: RecordRow, dataText: String? = nil) throws {
        try table(row.collection).update(try values(row, dataText: dataText))
    }

    func remove(_ collection: String, _ uuid: UUID) throws {
        try table(collection).remove(uuid)
    }

    func setState(_ collection: String, _ uuid: UUID, _ state: SyncState) throws {
        try table(collection).setState(uuid, state)
    }

    /// Sets the state of many records, one statement per collection: a
    /// push batch's 500 records were 500 statements, each with its fixed
    /// cost, on the device's path between two pushes.
    func setStates(_ records: [RecordReference], _ state: SyncState) throws {
        for (collection, members) in Dictionary(grouping: records, by: \.collection) {
            try table(collection).setStates(members.map(\.uuid), state)
        }
    }

    /// Sets the state only where it is still `expected`.
    func setState(_ collection: String, _ uuid: UUID, _ state: SyncState, from expected: SyncState) throws {
        try table(collection).setState(uuid, state, from: expected)
    }

    /// Every column's value, in `ControlColumn` order.
    private func values(_ row: RecordRow, dataText: String? = nil) throws -> [SQLiteValue] {
        [
            .text(row.uuid.wireText), .integer(row.serverID), .text(row.syncState.rawValue),
            .text(row.serverUpdatedAt?.rawValue), .text(row.localUpdatedAt),
            .text(try row.rejection.map { String(decoding: try WireCoding.encode($0), as: UTF8.self) }),
            .integer(row.baseVersion), .integer(row.serverVersion), .integer(row.onServer ? 1 : 0),
            .integer(row.deleted ? 1 : 0), .text(row.owner), .text(row.team), try payloads.stored(try dataText ?? row.data.jsonText()),
            .text(row.deviceTime?.rawValue),
        ]
    }
}

