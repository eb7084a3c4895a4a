import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting

/// push: mutations queued offline, then drained to `outpost serve`, each
/// figure beside a floor measured in the same run:
/// - server intake (mutations over the time the server spent answering
///   pushes) against the database itself writing what a push must write;
/// - the end-to-end drain (the device's whole sync) against that intake.
enum PushBench {
    static let batchSize = 500

    static func run(mutations: Int, postgres: String?) async throws -> [BenchResult] {
        var results: [BenchResult] = []
        let directory = try TemporaryDirectory(prefix: "outpost-bench")
        for backend in ["sqlite"] + (postgres == nil ? [] : ["postgres"]) {
            // Fresh databases for the floor and for the server, so both start
            // with no rows and (on PostgreSQL) no statistics.
            var scratch: [ScratchSchema] = []
            defer { for schema in scratch { schema.drop() } }
            func freshLocation(_ name: String) throws -> String {
                guard backend == "postgres", let postgres else { return directory.path("\(name).sqlite") }
                let schema = try ScratchSchema(on: postgres)
                scratch.append(schema)
                return schema.url(postgres)
            }
            let floorSeconds = try floor(at: try freshLocation("floor"), mutations: mutations)
            let floorRate = Double(mutations) / floorSeconds

            let location = try freshLocation("server")
            let database = try DatabaseLocation.open(location)
            _ = try SyncServer(database: database, config: ServerConfig())
            let token = try TokenStore(database: database).issue(user: "pusher-\(UUID().uuidString.prefix(8))", role: .field, team: "t", ttl: nil)
            database.close()
            let log = directory.path("server-\(backend).log")
            let server = try ServerProcess(database: location, logPath: log)
            defer { server.stop() }
            let store = try LocalStore(path: directory.path("device-\(backend).sqlite"), collections: [CollectionDescriptor(name: "people")])
            try await store.write { tx in
                for index in 0..<mutations { try tx.create(in: "people", Bench.recordObject(index)) }
            }
            var options = SyncOptions()
            options.liveUpdates = false  // measured (or replayed) cycle by cycle
            options.periodicInterval = nil
            options.pushBatchSize = batchSize
            options.requestTimeout = 120
            let engine = SyncEngine(store: store, transport: URLSessionTransport(baseURL: server.url), token: token, options: options)
            var confirmed = 0
            let seconds = try await Bench.time { confirmed = try await engine.sync(timeout: .seconds(1800)).confirmed }
            guard confirmed == mutations else { throw CommandFailure("Only \(confirmed) of \(mutations) mutations were confirmed.") }
            await engine.stop()
            await store.close()
            server.stop()
            let (serverSeconds, requests) = ServerProcess.serverSeconds(log: log, path: "/v1/push")
            let (pullSeconds, _) = ServerProcess.serverSeconds(log: log, path: "/v1/pull")
            guard serverSeconds > 0 else { throw CommandFailure("The server's log holds no answered push.") }
            let intake = Double(mutations) / serverSeconds
            let endToEnd = Double(mutations) / seconds
            let suffix = backend == "sqlite" ? "" : "-postgres"
            var intakeResult = BenchResult(
                name: "push" + suffix, figure: intake, unit: "mutations/s (server intake)",
                baseline: floorRate,
                baselineLabel: "\(backend == "sqlite" ? "SQLite" : "PostgreSQL") writing the same records and dedupe rows in batches of \(batchSize), no HTTP, no JSON",
                ratio: intake / floorRate, ratioMeaning: "server intake / floor", target: "at least 0.5x the floor",
                met: intake / floorRate >= 0.5)
            intakeResult.details = [
                "mutations": Double(mutations), "push_requests": Double(requests), "server_seconds": serverSeconds,
                "floor_seconds": floorSeconds,
            ]
            intakeResult.notes = ["records of ~300 bytes, batches of \(batchSize) over HTTP on loopback, a fresh database"]
            var drain = BenchResult(
                name: "push-end-to-end" + suffix, figure: endToEnd, unit: "mutations/s (device's whole sync)",
                baseline: intake, baselineLabel: "server intake, same run", ratio: endToEnd / intake,
                ratioMeaning: "end-to-end rate / server intake", target: "at least 0.8x intake", met: endToEnd / intake >= 0.8)
            // Where the drain's time went: the server's answers, and the rest
            // (the device's own work, and each request's trip through HTTP).
            drain.details = [
                "mutations": Double(mutations), "end_to_end_seconds": seconds, "server_push_seconds": serverSeconds,
                "server_pull_seconds": pullSeconds, "device_and_transport_seconds": seconds - serverSeconds - pullSeconds,
            ]
            drain.notes = ["from sync() to its report: taking batches from the outbox, HTTP, the server, settling each answer"]
            results += [intakeResult, drain]
        }
        return results
    }

    /// The floor: the database writing what a push of these records must
    /// write, in one process with no HTTP and no JSON coding. On the
    /// server's own schema (its indexes and search index), each batch one
    /// transaction: every record row at its feed version, every dedupe row
    /// (seq, mutation id, outcome), the client's last seq.
    static func floor(at location: String, mutations: Int) throws -> Double {
        let database = try DatabaseLocation.open(location)
        defer { database.close() }
        _ = try SyncServer(database: database, config: ServerConfig())
        let ids = UUIDv7Generator()
        let client = ids.next().wireText
        let rows = (0..<mutations).map { (uuid: ids.next().wireText, mutation: ids.next().wireText, data: Bench.recordData($0)) }
        let now = ServerTimestamp(Date()).rawValue
        let start = DispatchTime.now().uptimeNanoseconds
        for first in stride(from: 0, to: mutations, by: batchSize) {
            try database.write { sql in
                var versions = try FeedVersions.begin(sql)
                for index in first..<min(mutations, first + batchSize) {
                    let row = rows[index]
                    try sql.execute(
                        """
                        INSERT INTO records (collection, uuid, version, updated_at, deleted, owner, team, created_by_user,
                            created_by_client, data)
                        VALUES ('people', ?, ?, ?, 0, 'floor', 't', 'floor', ?, ?)
                        """, [.text(row.uuid), .integer(try versions.next()), .text(now), .text(client), .text(row.data)])
                    // Its words in the search index, as the server writes them.
                    if sql.dialect == .sqlite {
                        try sql.execute(
                            "INSERT INTO records_search (rowid, data) VALUES (last_insert_rowid(), ?)", [.text(row.data)])
                    }
                    try sql.execute(
                        """
                        INSERT INTO mutation_results (user_id, client_id, seq, mutation_id, result, created_at)
                        VALUES ('floor', ?, ?, ?, 'applied', ?)
                        """, [.text(client), .integer(Int64(index + 1)), .text(row.mutation), .text(now)])
                }
                try sql.execute(
                    """
                    INSERT INTO client_seqs (user_id, client_id, last_seq, updated_at) VALUES ('floor', ?, ?, ?)
                    ON CONFLICT (user_id, client_id) DO UPDATE SET last_seq = excluded.last_seq, updated_at = excluded.updated_at
                    """, [.text(client), .integer(Int64(min(mutations, first + batchSize))), .text(now)])
                try versions.finish(sql)
            }
        }
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }
}
