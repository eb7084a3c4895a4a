import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostSQLite
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
        // On SQLite, twice: the device and the server sharing the machine's
        // cores, then on a core each (`CorePinning`), as a phone and a server
        // run: what the server takes when nothing preempts it, and what one
        // core of device work drains.
        let cores = CorePinning.twoCores()
        // Read before any pinning: the cores this process is given back after
        // the run on a core each, so the benchmarks after it (and the
        // servers they start) have every core again.
        let allCores = CorePinning.allowedCores(getpid())
        let runs = [("sqlite", false)] + (cores == nil ? [] : [("sqlite", true)]) + (postgres == nil ? [] : [("postgres", false)])
        for (backend, ownCores) in runs {
            let suffix = (backend == "sqlite" ? "" : "-postgres") + (ownCores ? "-own-cores" : "")
            // Fresh databases for the floor, the server and the device, so
            // all start with no rows and (on PostgreSQL) no statistics. Each
            // run's files are its own: the run on a core each once reopened
            // the first run's (the device then met a server that did not
            // know its cursor and downloaded everything again).
            var scratch: [ScratchSchema] = []
            defer { for schema in scratch { schema.drop() } }
            func freshLocation(_ name: String) throws -> String {
                guard backend == "postgres", let postgres else { return directory.path("\(name)\(suffix).sqlite") }
                let schema = try ScratchSchema(on: postgres)
                scratch.append(schema)
                return schema.url(postgres)
            }
            // The floor runs on the core the server will have.
            if ownCores {
                guard let cores, allCores != nil, CorePinning.pin(getpid(), to: cores.server) else {
                    print("push on a core each: skipped, this process could not be pinned to a core")
                    continue
                }
            }
            let pinned = ownCores
            defer {
                if pinned, let allCores, !CorePinning.pin(getpid(), toList: allCores) {
                    print("warning: the benchmark could not be given back the cores \(allCores)")
                }
            }
            // The median of three floors, each on a fresh database: one run
            // of it varied from 0.19 to 0.32 s in one evening on this
            // machine, and the ratio with it.
            let floorRuns = try (1...3).map { run in try floor(at: try freshLocation("floor-\(run)"), mutations: mutations) }.sorted()
            let floorSeconds = floorRuns[1]
            let floorRate = Double(mutations) / floorSeconds
            // The floor (and the server) commit durably: every batch on
            // stable storage before it counts. The same floor with commits
            // that survive a process crash only shows what that costs.
            let crashOnlyFloorSeconds =
                backend == "sqlite"
                ? try (1...3).map { run in
                    try floor(at: try freshLocation("floor-crash-only-\(run)"), mutations: mutations, durability: .processCrash)
                }.sorted()[1] : nil

            let location = try freshLocation("server")
            let database = try DatabaseLocation.open(location)
            _ = try SyncServer(database: database, config: ServerConfig())
            let token = try TokenStore(database: database).issue(user: "pusher-\(UUID().uuidString.prefix(8))", role: .field, team: "t", ttl: nil)
            database.close()
            let log = directory.path("server\(suffix).log")
            let server = try ServerProcess(database: location, logPath: log)
            defer { server.stop() }
            if pinned, let cores {
                guard CorePinning.pin(server.process.processIdentifier, to: cores.server), CorePinning.pin(getpid(), to: cores.device)
                else { throw CommandFailure("The device and the server could not be given a core each.") }
            }
            let store = try LocalStore(path: directory.path("device\(suffix).sqlite"), collections: [CollectionDescriptor(name: "people")])
            try await store.write { tx in
                for index in 0..<mutations { try tx.create(in: "people", Bench.recordObject(index)) }
            }
            var options = SyncOptions()
            options.liveUpdates = false  // measured (or replayed) cycle by cycle
            options.periodicInterval = nil
            options.pushBatchSize = batchSize
            options.requestTimeout = 120
            let engine = SyncEngine(store: store, transport: HTTPTransport.make(baseURL: server.url), token: token, options: options)
            // CPU used during the drain: this process is the device alone
            // then (its engine, URLSession and store threads); the server's
            // from its /proc figures. Steadier than the times when looking
            // for work moved or removed on one side.
            let deviceCPUBefore = Bench.ownCPUSeconds()
            let serverCPUBefore = Bench.cpuSeconds(server.process.processIdentifier)
            // A cycle that got no answer is run again, as a device's engine
            // would (its entries are resent and the server answers the ones it
            // holds `duplicate`); the count is reported beside the figure.
            var retriedCycles = 0
            let seconds = try await Bench.time {
                while true {
                    do {
                        _ = try await engine.sync(timeout: .seconds(1800))
                        break
                    } catch SyncFailure.noAnswer where retriedCycles < 3 {
                        retriedCycles += 1
                    }
                }
            }
            let deviceCPU = Bench.ownCPUSeconds() - deviceCPUBefore
            let serverCPU = Bench.cpuSeconds(server.process.processIdentifier) - serverCPUBefore
            let left = try await store.outboxEntries().count
            guard left == 0 else { throw CommandFailure("\(left) of \(mutations) mutations were never confirmed.") }
            await engine.stop()
            await store.close()
            server.stop()
            let (serverSeconds, requests) = ServerProcess.serverSeconds(log: log, path: "/v1/push")
            let (pullSeconds, _) = ServerProcess.serverSeconds(log: log, path: "/v1/pull")
            guard serverSeconds > 0 else { throw CommandFailure("The server's log holds no answered push.") }
            let intake = Double(mutations) / serverSeconds
            let endToEnd = Double(mutations) / seconds
            var intakeResult = BenchResult(
                name: "push" + suffix, figure: intake, unit: "mutations/s (server intake)",
                baseline: floorRate,
                baselineLabel: "\(backend == "sqlite" ? "SQLite" : "PostgreSQL") doing the same look-ups and writing the same rows (record, search words, history, dedupe result) in batches of \(batchSize), no HTTP, no JSON (median of three runs)",
                ratio: intake / floorRate, ratioMeaning: "server intake / floor", target: "at least 0.5x the floor",
                met: intake / floorRate >= 0.5)
            intakeResult.details = [
                "mutations": Double(mutations), "push_requests": Double(requests), "server_seconds": serverSeconds,
                "floor_seconds": floorSeconds, "floor_seconds_fastest": floorRuns[0], "floor_seconds_slowest": floorRuns[2],
            ]
            if let crashOnlyFloorSeconds { intakeResult.details["floor_crash_only_seconds"] = crashOnlyFloorSeconds }
            intakeResult.notes = ["records of ~300 bytes, batches of \(batchSize) over HTTP on loopback, a fresh database"]
                + (pinned ? cores.map { ["the server and the floor on core \($0.server), the device on core \($0.device)"] } ?? [] : [])
            var drain = BenchResult(
                name: "push-end-to-end" + suffix, figure: endToEnd, unit: "mutations/s (device's whole sync)",
                baseline: intake, baselineLabel: "server intake, same run", ratio: endToEnd / intake,
                ratioMeaning: "end-to-end rate / server intake", target: "at least 0.8x intake", met: endToEnd / intake >= 0.8)
            // Where the drain's time went: the server's answers, and the rest
            // (the device's own work, and each request's trip through HTTP).
            drain.details = [
                "mutations": Double(mutations), "end_to_end_seconds": seconds, "server_push_seconds": serverSeconds,
                "server_pull_seconds": pullSeconds, "device_and_transport_seconds": seconds - serverSeconds - pullSeconds,
                "device_cpu_seconds": deviceCPU, "server_cpu_seconds": serverCPU,
                "cycles_retried_after_no_answer": Double(retriedCycles),
            ]
            drain.notes = ["from sync() to its report: taking batches from the outbox, HTTP, the server, settling each answer"]
                + (pinned ? ["the device's work on one core of its own"] : [])
            results += [intakeResult, drain]
        }
        return results
    }

    /// The floor: the database doing what a push of these records must have
    /// it do, in one process with no HTTP and no JSON coding. On the
    /// server's own schema, each batch one transaction: for every record
    /// the look-up of a copy it might replace, its row at its feed version,
    /// its words in the search index, its history row, and its dedupe row
    /// (the outcome and the record's version, as the server keeps it); then
    /// the client's last seq.
    /// What the server adds to this is HTTP, the JSON of the request and
    /// the answer, and its checks.
    static func floor(at location: String, mutations: Int, durability: Durability = .powerLoss) throws -> Double {
        let database: any ServerDatabase =
            durability == .powerLoss || location.hasPrefix("postgres")
            ? try DatabaseLocation.open(location) : try SQLiteServerDatabase(path: location, vfs: nil, durability: durability)
        defer { database.close() }
        _ = try SyncServer(database: database, config: ServerConfig())
        let ids = UUIDv7Generator()
        let client = ids.next().wireText
        let time = ServerTimestamp(Date())
        let now = time.rawValue
        let rows = (0..<mutations).map { index in
            let uuid = ids.next()
            let mutation = ids.next()
            let data = Bench.recordData(index)
            return (uuid: uuid.wireText, mutation: mutation.wireText, data: data, result: #"{"status":"applied"}"#)
        }
        let start = DispatchTime.now().uptimeNanoseconds
        for first in stride(from: 0, to: mutations, by: batchSize) {
            try database.write { sql in
                var versions = try FeedVersions.begin(sql)
                let resultIDs = try ResultIDs.current(sql)
                for index in first..<min(mutations, first + batchSize) {
                    let row = rows[index]
                    let version = try versions.next()
                    _ = try sql.recordRow("people", row.uuid, forUpdate: true)
                    let id = try sql.insertReturningID(
                        """
                        INSERT INTO records (collection, uuid, version, updated_at, deleted, owner, team, created_by_user,
                            created_by_client, data, written_user, written_client, written_seq, written_version)
                        VALUES ('people', ?, ?, ?, 0, 'floor', 't', 'floor', ?, ?, 'floor', ?, ?, ?)
                        """,
                        [
                            .text(row.uuid), .integer(version), .text(now), .text(client), .text(row.data), .text(client),
                            .integer(Int64(index + 1)), .integer(version),
                        ])
                    try SearchIndex.add(id: id, data: row.data, in: sql)
                    try sql.execute(
                        """
                        INSERT INTO record_history (collection, uuid, version, op, at, user_id, client_id, owner, team)
                        VALUES ('people', ?, ?, 'create', ?, 'floor', ?, 'floor', 't')
                        """, [.text(row.uuid), .integer(version), .text(now), .text(client)])
                    try sql.execute(
                        """
                        INSERT INTO mutation_results (user_id, client_id, seq, mutation_id, result, created_at, record_version)
                        VALUES ('floor', ?, ?, ?, ?, ?, ?)
                        """,
                        [
                            resultIDs.value(client), .integer(Int64(index + 1)), resultIDs.value(row.mutation), .text(row.result),
                            .text(now),
                            .integer(version),
                        ])
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
