import Foundation
import OutpostCore
import OutpostServer
import OutpostTesting

/// disk: the server database's bytes per record after a field season's
/// writes, beside the floor of the records themselves (`records` and its
/// indexes, the search index included). Devices create records of about
/// 230 bytes of data, then edit 43% of them once (1.43 changes per record,
/// as a 20-device soak wrote), all through the server's push.
enum DiskBench {
    static let devices = 20
    static let editShare = 0.43
    static let batch = 500

    static func run(records: Int, postgres: String?) async throws -> [BenchResult] {
        var results: [BenchResult] = []
        let directory = try TemporaryDirectory(prefix: "outpost-bench-disk")
        for backend in ["sqlite"] + (postgres == nil ? [] : ["postgres"]) {
            var scratch: ScratchSchema?
            defer { scratch?.drop() }
            let location: String
            if backend == "postgres", let postgres {
                let schema = try ScratchSchema(on: postgres)
                scratch = schema
                location = schema.url(postgres)
            } else {
                location = directory.path("server.sqlite")
            }
            let database = try DatabaseLocation.open(location)
            defer { database.close() }
            let server = try SyncServer(database: database, config: ServerConfig())
            let mutations = try write(records: records, to: server)
            let sizes = try TableSizes.measure(database, schema: scratch?.name)
            results.append(result(sizes, records: records, mutations: mutations, backend: backend))
        }
        return results
    }

    /// Pushes every device's creates, then its edits; returns the changes sent.
    static func write(records: Int, to server: SyncServer) throws -> Int {
        var sent = 0
        for device in 0..<devices {
            let token = try server.tokens.issue(user: "disk-\(device)", role: .field, team: "t", ttl: nil)
            let client = UUID()
            var seq: Int64 = 0
            let count = records / devices + (device < records % devices ? 1 : 0)
            var versions: [(uuid: UUID, version: Int64)] = []
            for start in stride(from: 0, to: count, by: batch) {
                let creates = (start..<min(start + batch, count)).map { index -> Mutation in
                    seq += 1
                    return Mutation(
                        seq: seq, id: UUID(), op: .create, collection: "people", uuid: UUID(), baseVersion: nil,
                        data: person(device: device, index: index, edit: 0))
                }
                let answer = try push(creates, client: client, token: token, to: server)
                versions += zip(creates, answer.results).map { ($0.uuid, $1.record?.version ?? 0) }
                sent += creates.count
            }
            let edited = versions.prefix(Int((Double(count) * editShare).rounded()))
            for start in stride(from: 0, to: edited.count, by: batch) {
                let edits = edited[(edited.startIndex + start)..<min(edited.startIndex + start + batch, edited.endIndex)]
                    .enumerated().map { offset, record -> Mutation in
                        seq += 1
                        return Mutation(
                            seq: seq, id: UUID(), op: .update, collection: "people", uuid: record.uuid,
                            baseVersion: record.version, data: ["notes": .string(notes(device: device, index: start + offset, edit: 1))])
                    }
                _ = try push(edits, client: client, token: token, to: server)
                sent += edits.count
            }
        }
        return sent
    }

    static func push(_ mutations: [Mutation], client: UUID, token: String, to server: SyncServer) throws -> PushResponse {
        let body = try WireCoding.encode(PushRequest(clientID: client, mutations: mutations))
        let answer = server.handle(
            HTTPRequest(
                method: "POST", path: "/v1/push",
                headers: ["authorization": "Bearer \(token)", "content-type": "application/json"], body: Data(body)))
        guard answer.status == 200 else {
            throw CommandFailure("disk: a push was answered \(answer.status): \(String(decoding: answer.body, as: UTF8.self))")
        }
        let response = try WireCoding.decode(PushResponse.self, from: Data(answer.body))
        guard response.results.allSatisfy({ $0.status == .applied }) else {
            throw CommandFailure("disk: a change was not applied: \(response.results.map(\.status.rawValue))")
        }
        return response
    }

    /// About 230 bytes of JSON, as the soak's records held.
    static func person(device: Int, index: Int, edit: Int) -> JSONObject {
        [
            "name": .string("Person \(device)-\(index) Fernández"),
            "phone": .string("+52 55 \(String(format: "%04d", index % 10_000)) \(String(format: "%04d", (index * 7) % 10_000))"),
            "address": .string("Calle \(index % 300) #\(index % 97), Colonia Centro, Oaxaca"),
            "notes": .string(notes(device: device, index: index, edit: edit)),
            "section": .int(Int64(index % 40)),
        ]
    }

    static func notes(device: Int, index: Int, edit: Int) -> String {
        "Visit \(edit + 1): household of \(index % 7 + 1), water from the well, asked to come back on a weekday."
    }

    static func result(_ sizes: TableSizes, records: Int, mutations: Int, backend: String) -> BenchResult {
        let perRecord = { (bytes: Int64) in Double(bytes) / Double(records) }
        let floor = perRecord(sizes.bytes(of: "records"))
        let total = perRecord(sizes.total)
        var details: [String: Double] = [:]
        for (table, bytes) in sizes.byTable where bytes > 0 { details["\(table)_bytes_per_record"] = perRecord(bytes) }
        details["mutations_per_record"] = Double(mutations) / Double(records)
        let ratio = total / floor
        return BenchResult(
            name: "disk-per-record" + (backend == "sqlite" ? "" : "-postgres"), figure: total, unit: "bytes per record",
            baseline: floor, baselineLabel: "records and its indexes", ratio: ratio,
            ratioMeaning: "the database's bytes over the records table's, per record", target: "≤ 2.00× records and its indexes",
            met: ratio <= 2.0, details: details,
            notes: [
                "\(records) records, \(mutations) changes from \(devices) devices; every table with its indexes, at the default retention "
                    + "(nothing is old enough to expire)"
            ])
    }
}

/// Each table's bytes with its indexes (and, on PostgreSQL, its TOAST):
/// `dbstat` pages on SQLite (as the connection sees them, WAL included; the
/// pages in use, not the free list; the search index's own tables counted with
/// `records`), `pg_total_relation_size` on PostgreSQL.
struct TableSizes {
    var byTable: [String: Int64] = [:]
    var total: Int64 { byTable.values.reduce(0, +) }
    func bytes(of table: String) -> Int64 { byTable[table] ?? 0 }

    static func measure(_ database: any ServerDatabase, schema: String?) throws -> TableSizes {
        var sizes = TableSizes()
        if database.dialect == .postgres {
            try database.read { sql in
                let rows = try sql.query(
                    """
                    SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c
                    JOIN pg_namespace n ON n.oid = c.relnamespace
                    WHERE c.relkind = 'r' AND n.nspname = current_schema()
                    """, [])
                for row in rows { sizes.byTable[row.string(0)] = row.int(1) }
            }
            return sizes
        }
        try database.read { sql in
            let owners = Dictionary(
                try sql.query("SELECT name, tbl_name FROM sqlite_master WHERE type IN ('table', 'index')", []).map {
                    ($0.string(0), $0.string(1))
                }, uniquingKeysWith: { first, _ in first })
            for row in try sql.query("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name", []) {
                var table = owners[row.string(0)] ?? row.string(0)
                if table.hasPrefix("records_search") { table = "records" }
                if table.hasPrefix("sqlite_") { table = "sqlite_schema" }
                sizes.byTable[table, default: 0] += row.int(1)
            }
        }
        return sizes
    }
}
