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
        let empty = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
        out.append(contentsOf: #"{"collection":"#.utf8)
        JSONWriter.writeString(utf8: row.text(1) ?? empty, to: &out)
        out.append(contentsOf: #","uuid":"#.utf8)
        JSONWriter.writeString(utf8: row.text(2) ?? empty, to: &out)
        out.append(contentsOf: #","id":"#.utf8)
        JSONWriter.writeInteger(row.int(0), to: &out)
        out.append(contentsOf: #","version":"#.utf8)
        JSONWriter.writeInteger(row.int(3), to: &out)
        out.append(contentsOf: #","updated_at":"#.utf8)
        JSONWriter.writeString(utf8: row.text(4) ?? empty, to: &out)
        let deleted = row.bool(5)
        out.append(contentsOf: deleted ? #","deleted":true"#.utf8 : #","deleted":false"#.utf8)
        out.append(contentsOf: #","owner":"#.utf8)
        JSONWriter.writeString(utf8: row.text(6) ?? empty, to: &out)
        out.append(contentsOf: #","team":"#.utf8)
        JSONWriter.writeString(utf8: row.text(7) ?? empty, to: &out)
        out.append(contentsOf: #","data":"#.utf8)
        if !deleted, let data = row.text(10) {
            out.append(contentsOf: data)
        } else {
            out.append(contentsOf: "null".utf8)
        }
        if let deviceTime = row.text(11) {
            out.append(contentsOf: #","device_time":"#.utf8)
            JSONWriter.writeString(utf8: deviceTime, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }
}
