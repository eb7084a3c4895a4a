import Foundation
import OutpostCore

/// A row of the server's `records` table.
struct ServerRecord {
    var id: Int64
    var collection: String
    var uuid: String
    var version: Int64
    var updatedAt: String
    var deleted: Bool
    var owner: String
    var team: String
    var createdByUser: String
    var createdByClient: String
    /// The fields as stored: canonical JSON text, spliced into answers as is.
    var dataText: String?
    /// The device clock's time of the last write, as sent (display only).
    var deviceTime: String?

    static let columns =
        "id, collection, uuid, version, updated_at, deleted, owner, team, created_by_user, created_by_client, data, device_time"

    /// `columns` as a pull page reads them: the creator's user and client are
    /// not on the wire, and NULL in their places keeps the numbering. (On
    /// PostgreSQL every column selected is converted to text and sent: these
    /// two were a tenth of a page's bytes.)
    static let feedColumns =
        "id, collection, uuid, version, updated_at, deleted, owner, team, NULL, NULL, data, device_time"

    /// One record by its collection and uuid: answerable by the unique index
    /// on both, whatever the database knows of its tables (tests check the
    /// plan on a new database).
    static let lookupQuery = "SELECT \(columns) FROM records WHERE collection = ? AND uuid = ?"

    func data() throws -> JSONObject? {
        try dataText.map { try JSONObject.parseObject($0) }
    }

    func wire() throws -> WireRecord {
        WireRecord(
            collection: collection, uuid: UUID.fromWire(uuid) ?? UUID(), id: id, version: version,
            updatedAt: ServerTimestamp(rawValue: updatedAt), deleted: deleted, owner: owner, team: team,
            data: deleted ? nil : try data(), deviceTime: deviceTime.map(ServerTimestamp.init(rawValue:)))
    }

    /// A row selected with `columns`, written as the wire JSON straight from
    /// the database's bytes: stored data text is spliced in as is (the hot
    /// path of pull: JSON coding (docs/benchmarks.md), not SQLite or HTTP, is what
    /// costs), and no value is made per row.
    static func appendJSON(_ row: SQLRawRow, to out: inout [UInt8]) {
        appendJSON(fields: row, to: &out)
    }

    /// This record as the wire JSON, its stored data text spliced in as is
    /// (a push's answer: never parsed and written again).
    func appendJSON(to out: inout [UInt8]) {
        Self.appendJSON(fields: self, to: &out)
    }

    /// The wire JSON of a record from its columns (numbered as in `columns`).
    private static func appendJSON(fields: some RecordColumns, to out: inout [UInt8]) {
        func string(_ column: Int) {
            fields.withText(column) { JSONWriter.writeString(utf8: $0 ?? UnsafeBufferPointer(start: nil, count: 0), to: &out) }
        }
        out.append(contentsOf: WireKey.collection.opening)
        string(1)
        out.append(contentsOf: WireKey.uuid.member)
        string(2)
        out.append(contentsOf: WireKey.id.member)
        JSONWriter.writeInteger(fields.int(0), to: &out)
        out.append(contentsOf: WireKey.version.member)
        JSONWriter.writeInteger(fields.int(3), to: &out)
        out.append(contentsOf: WireKey.updatedAt.member)
        string(4)
        let deleted = fields.bool(5)
        out.append(contentsOf: WireKey.deleted.member(deleted))
        out.append(contentsOf: WireKey.owner.member)
        string(6)
        out.append(contentsOf: WireKey.team.member)
        string(7)
        out.append(contentsOf: WireKey.data.member)
        fields.withText(10) { data in
            if !deleted, let data { out.append(contentsOf: data) } else { out.append(contentsOf: "null".utf8) }
        }
        fields.withText(11) { deviceTime in
            guard let deviceTime else { return }
            out.append(contentsOf: WireKey.deviceTime.member)
            JSONWriter.writeString(utf8: deviceTime, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }
}

extension ServerRecord {
    /// A row selected with `columns`. (Declared here so that the memberwise
    /// initializer stays: a record just written is built from its parts.)
    init(_ row: SQLRow) {
        id = row.int(0)
        collection = row.string(1)
        uuid = row.string(2)
        version = row.int(3)
        updatedAt = row.string(4)
        deleted = row.bool(5)
        owner = row.string(6)
        team = row.string(7)
        createdByUser = row.string(8)
        createdByClient = row.string(9)
        dataText = row.optionalString(10)
        deviceTime = row.optionalString(11)
    }
}

/// A record's columns, numbered as in `ServerRecord.columns`: a row read in
/// place or a record in memory, written to the wire by one function.
protocol RecordColumns {
    /// The column's text as UTF-8 (nil when NULL), valid during `body` only.
    func withText(_ column: Int, _ body: (UnsafeBufferPointer<UInt8>?) -> Void)
    func int(_ column: Int) -> Int64
    func bool(_ column: Int) -> Bool
}

extension SQLRawRow: RecordColumns {
    func withText(_ column: Int, _ body: (UnsafeBufferPointer<UInt8>?) -> Void) { body(text(column)) }
}

extension ServerRecord: RecordColumns {
    func withText(_ column: Int, _ body: (UnsafeBufferPointer<UInt8>?) -> Void) {
        let value: String?
        switch column {
        case 1: value = collection
        case 2: value = uuid
        case 4: value = updatedAt
        case 6: value = owner
        case 7: value = team
        case 8: value = createdByUser
        case 9: value = createdByClient
        case 10: value = dataText
        case 11: value = deviceTime
        default: value = nil
        }
        guard var text = value else { return body(nil) }
        text.withUTF8 { body($0) }
    }

    func int(_ column: Int) -> Int64 { column == 0 ? id : version }
    func bool(_ column: Int) -> Bool { deleted }
}

extension SQLExecutor {
    /// The record `collection`/`uuid` as stored (`ServerRecord.columns`);
    /// with `forUpdate`, locked until COMMIT on PostgreSQL, so another write
    /// of it waits for this transaction. (`outpost bench push`'s floor makes
    /// the push's look-up with it.)
    package func recordRow(_ collection: String, _ uuid: String, forUpdate: Bool = false) throws -> SQLRow? {
        try first(ServerRecord.lookupQuery + (forUpdate ? self.forUpdate : ""), [.text(collection), .text(uuid)])
    }

    func record(_ collection: String, _ uuid: String, forUpdate: Bool = false) throws -> ServerRecord? {
        try recordRow(collection, uuid, forUpdate: forUpdate).map(ServerRecord.init)
    }
}
