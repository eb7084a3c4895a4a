import Foundation
import OutpostCore

/// The console's records: search with filters, one record's page (its
/// data, every version, its tombstone, who can see it, what was refused
/// about it), and reassignment.
struct ConsoleRecords {
    let database: any ServerDatabase
    let config: ServerConfig

    /// The most rows one search answers.
    static let pageSize = 50

    /// What the records page asks for.
    struct Filter {
        var collection: String
        var text: String?
        var owner: String?
        var team: String?
        /// The window field's value from (inclusive) and to (exclusive), RFC 3339.
        var from: String?
        var to: String?
        /// `live` (default), `deleted` or `all`.
        var deleted = "live"

        init(_ query: [String: String], config: ServerConfig) throws {
            guard let collection = query["collection"], config.collections[collection] != nil else {
                throw APIError(
                    .invalidRequest, "Choose a collection to search.", fields: ["collection": "must be a known collection"])
            }
            self.collection = collection
            func present(_ name: String) -> String? {
                guard let value = query[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
                return value
            }
            text = present("q")
            owner = present("owner")
            team = present("team")
            for (name, value) in [("from", present("from")), ("to", present("to"))] {
                guard let value else { continue }
                guard let date = ServerTimestamp(rawValue: value).date ?? Self.day(value) else {
                    throw APIError(
                        .invalidRequest, "The \(name) date is not a date.",
                        fields: [name: "must be a date such as 2026-01-31 or an RFC 3339 time"])
                }
                if name == "from" { from = ServerTimestamp(date).rawValue } else { to = ServerTimestamp(date).rawValue }
            }
            if let deleted = present("deleted") {
                guard ["live", "deleted", "all"].contains(deleted) else {
                    throw APIError(
                        .invalidRequest, "Show live, deleted or all records.", fields: ["deleted": "must be live, deleted or all"])
                }
                self.deleted = deleted
            }
            for value in [text, owner, team] where (value?.utf8.count ?? 0) > 200 {
                throw APIError(.invalidRequest, "Search texts and names are at most 200 bytes.", fields: ["q": "too long"])
            }
        }

        /// `2026-01-31` as the start of that day, UTC.
        static func day(_ text: String) -> Date? {
            ServerTimestamp(rawValue: text + "T00:00:00Z").date
        }
    }

    func search(_ filter: Filter) throws -> JSONValue {
        let started = DispatchTime.now().uptimeNanoseconds
        var arguments: [SQLValue] = [.text(filter.collection)]
        var conditions = ["collection = ?"]
        var search: RecordSearch?
        if let text = filter.text {
            guard let words = RecordSearch(text) else {
                throw APIError(.invalidRequest, "Give at least one word to search for.", fields: ["q": "holds no word"])
            }
            search = words
        }
        let filters = [("owner = ?", filter.owner), ("team = ?", filter.team), ("window_at >= ?", filter.from), ("window_at < ?", filter.to)]
        for case let (condition, value?) in filters {
            conditions.append(condition)
            arguments.append(.text(value))
        }
        switch filter.deleted {
        case "deleted": conditions.append("deleted = 1")
        case "all": break
        default: conditions.append("deleted = 0")
        }
        let condition = conditions.joined(separator: " AND ")
        let rows = try database.read { sql in
            if let search {
                return try search.newest(sql, columns: ServerRecord.columns, where: condition, arguments, limit: Self.pageSize + 1)
            }
            return try sql.query(
                "SELECT \(ServerRecord.columns) FROM records WHERE \(condition) ORDER BY version DESC LIMIT ?",
                arguments + [.integer(Int64(Self.pageSize + 1))])
        }
        let millis = Double(DispatchTime.now().uptimeNanoseconds - started) / 1_000_000
        return [
            "records": .array(rows.prefix(Self.pageSize).map { Self.summary(ServerRecord($0)) }),
            "more": .bool(rows.count > Self.pageSize),
            "milliseconds": .double((millis * 10).rounded() / 10),
        ]
    }

    static func summary(_ record: ServerRecord) -> JSONValue {
        [
            "collection": .string(record.collection), "uuid": .string(record.uuid), "version": .int(record.version),
            "updated_at": .string(record.updatedAt), "deleted": .bool(record.deleted), "owner": .string(record.owner),
            "team": .string(record.team), "data": .stored(record.dataText),
        ]
    }

    /// One record's page.
    func record(_ collection: String, _ uuidText: String) throws -> JSONValue {
        guard let schema = config.collections[collection] else {
            throw APIError(.notFound, "There is no collection named '\(collection)'.")
        }
        guard let uuid = UUID.fromWire(uuidText) else {
            throw APIError(.invalidRequest, "The record id is not a UUID.", fields: ["uuid": "must be a UUID"])
        }
        let key: [SQLValue] = [.text(collection), .text(uuid.wireText)]
        return try database.read { sql in
            guard let record = try sql.record(collection, uuid.wireText) else { throw APIError(.notFound, "There is no such record (or it was deleted long enough ago to be purged).") }
            let history = try sql.query(
                """
                SELECT version, op, at, user_id, client_id, device_time, owner, team, data FROM record_history
                WHERE collection = ? AND uuid = ? ORDER BY version DESC LIMIT 200
                """, key
            ).map { row -> JSONValue in
                [
                    "version": .int(row.int(0)), "op": .string(row.string(1)), "server_time": .string(row.string(2)),
                    "user": .string(row.string(3)), "client": .string(row.string(4)), "device_time": .text(row.optionalString(5)),
                    "owner": .string(row.string(6)), "team": .string(row.string(7)),
                    "data": .stored(RecordHistory.data(stored: row.optionalString(8), version: row.int(0), of: record)),
                ]
            }
            let problems = try ConsoleProblems.rows(
                where: "collection = ? AND uuid = ?", key, limit: 50, sql)
            // Those with a live token who read it: its owner, its team's coordinators, every administrator.
            let readers = try sql.query(
                """
                SELECT DISTINCT user_id, role FROM tokens WHERE revoked_at IS NULL AND (
                    (role = 'field' AND user_id = ?) OR (role = 'coordinator' AND team = ?) OR role = 'admin')
                ORDER BY role, user_id LIMIT 100
                """, [.text(record.owner), .text(record.team)]
            ).map { row -> JSONValue in ["user": .string(row.string(0)), "role": .string(row.string(1))] }
            var attachments: [JSONValue] = []
            for (field, file) in AttachedFile.all(in: try? record.data(), schema: schema).sorted(by: { $0.key < $1.key }) {
                let held = try sql.first("SELECT complete FROM blobs WHERE sha256 = ?", [.text(file.sha256)])?.bool(0) ?? false
                attachments.append([
                    "field": .string(field), "sha256": .string(file.sha256), "size": .int(file.size),
                    "content_type": .string(file.contentType), "held": .bool(held),
                ])
            }
            var page = Self.summary(record).objectValue ?? [:]
            page["device_time"] = .text(record.deviceTime)
            page["created_by"] = ["user": .string(record.createdByUser), "client": .string(record.createdByClient)]
            page["tombstone"] = record.deleted ? ["deleted_at": .string(record.updatedAt), "version": .int(record.version)] : .null
            page["history"] = .array(history)
            page["problems"] = .array(problems)
            page["readers"] = [
                "owner": .string(record.owner), "team": .string(record.team), "users": .array(readers),
                "rule": .string("its owner, the coordinators of its team, and every administrator"),
            ]
            page["attachments"] = .array(attachments)
            return .object(page)
        }
    }
}
