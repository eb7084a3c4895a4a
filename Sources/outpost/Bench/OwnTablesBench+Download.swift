import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostSQLite
import OutpostTesting

extension OwnTablesBench {
    /// Rows the app's table held before Outpost was pointed at it (random v4
    /// keys, as `gen_random_uuid()` makes them): the server's start until
    /// every row has its copy (the backfill), then one device downloading
    /// them all through the real engine, against SQLite copying the same
    /// rows between two files (the floor initial-sync uses).
    ///
    /// Then the backend updates `bulkRows` of those rows in one statement:
    /// the time until the server has sequenced them all, against the
    /// backfill's pace over the same rows.
    static func download(postgres: String, rows: Int, bulkRows: Int) async throws -> [BenchResult] {
        let directory = try TemporaryDirectory(prefix: "outpost-bench-own")
        let schema = try ScratchSchema(on: postgres)
        defer { schema.drop() }
        let url = schema.url(postgres)
        let database = try PostgresDatabase(url: url, poolSize: 1)
        defer { database.close() }
        try createAppTable(in: database)
        _ = try database.write { sql in
            try sql.execute(
                """
                INSERT INTO fuel_logs (id, user_id, fleet_id, liters, price_per_liter, filled_at, note)
                SELECT gen_random_uuid(), ?, ?, 20 + (i % 400) / 10.0, 1.5 + (i % 100) / 1000.0,
                    timestamptz '2026-01-05 10:00:00+00' + i * interval '7 seconds',
                    'Filled at the depot on round ' || (i % 17) || '; receipt kept in the glovebox until the month ends.'
                FROM generate_series(1, ?) i
                """, [.text(user), .text(team), .integer(Int64(rows))])
        }
        // An app's table in service has been vacuumed and analyzed.
        try database.runOutsideTransaction("VACUUM ANALYZE fuel_logs")
        // Outpost's own tables, and the device's token, before the server
        // that maps the table starts.
        _ = try SyncServer(database: database, config: ServerConfig())
        let token = try TokenStore(database: database).issue(user: user, role: .field, team: team, ttl: nil)

        let config = directory.path("config.json")
        try writeConfig(schema: schema.name, to: config)
        let log = directory.path("server.log")
        let started = DispatchTime.now().uptimeNanoseconds
        let server = try ServerProcess(database: url, logPath: log, extra: ["--config", config])
        defer { server.stop() }
        let serving = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        let backfill = try await backfillSeconds(database, since: started, within: 1800)
        // The copies were written a moment ago; a deployment's have been
        // vacuumed since (initial-sync does the same for its records).
        try database.runOutsideTransaction("VACUUM records")

        let store = try deviceStore(directory.path("device.sqlite"))
        var options = SyncOptions()
        options.liveUpdates = false
        options.periodicInterval = nil
        options.pullPageSize = 5000
        options.requestTimeout = 120
        let engine = SyncEngine(store: store, transport: HTTPTransport.make(baseURL: server.url), token: token, options: options)
        var received = 0
        let seconds = try await Bench.time { received = try await engine.sync(timeout: .seconds(1800)).received }
        await engine.stop()
        await store.close()
        let bulk = min(bulkRows, rows)
        let bulkSeconds = try await sequencingSeconds(database, rows: bulk)
        server.stop()
        guard received >= rows else { throw CommandFailure("The device received \(received) of the table's \(rows) rows.") }
        let (serverSeconds, pages) = ServerProcess.serverSeconds(log: log, path: "/v1/pull")

        let copySource = directory.path("copy-source.sqlite")
        try copyToSQLite(from: database, to: copySource)
        // The faster of two copies, as initial-sync takes.
        let floor = try (1...2).map { try Bench.sqliteCopySeconds(from: copySource, to: directory.path("copy-\($0).sqlite")) }.min()!
        let ratio = seconds / floor
        var result = BenchResult(
            name: "own-tables-download", figure: seconds, unit: "s",
            baseline: floor, baselineLabel: "SQLite copying the same rows between two files", ratio: ratio,
            ratioMeaning: "device download time / SQLite copy time", target: "at most 2.5x (as initial-sync from PostgreSQL)",
            met: ratio <= 2.5)
        result.details = [
            "rows": Double(rows), "received": Double(received), "rows_per_second": Double(received) / seconds,
            "server_seconds_answering_pulls": serverSeconds, "pages": Double(pages),
        ]
        result.notes = ["rows with random v4 keys inserted by SQL before the server started, downloaded by a field device whose scope is all of them"]
        var backfilled = BenchResult(
            name: "own-tables-backfill", figure: backfill, unit: "s from `outpost serve` starting to every existing row sequenced",
            baseline: nil, baselineLabel: nil, ratio: nil, ratioMeaning: nil, target: "reported", met: nil)
        backfilled.details = [
            "rows": Double(rows), "rows_per_second": Double(rows) / backfill, "seconds_until_serving": serving,
            "batch_rows": 2_000,
        ]
        let bulkRate = Double(bulk) / bulkSeconds
        let backfillRate = Double(rows) / backfill
        var sequenced = BenchResult(
            name: "own-tables-backend-bulk", figure: bulkRate,
            unit: "rows/s sequenced after one backend UPDATE of \(bulk) rows (its COMMIT to the queue empty)",
            baseline: backfillRate, baselineLabel: "the backfill's rows/s over the same table, same run",
            ratio: bulkRate / backfillRate, ratioMeaning: "sequencing rate / backfill rate", target: "reported", met: nil)
        sequenced.details = ["rows": Double(bulk), "seconds": bulkSeconds, "keys_per_round": 1_000]
        return [backfilled, result, sequenced]
    }

    /// The backend (plain SQL) updates the first `rows` rows in key order in
    /// one statement; seconds from its COMMIT until the server's sequencer
    /// has given them all their versions (the queue read every 20 ms).
    static func sequencingSeconds(_ database: PostgresDatabase, rows: Int) async throws -> Double {
        _ = try database.write { sql in
            try sql.execute(
                "UPDATE fuel_logs SET liters = liters + 1 WHERE id IN (SELECT id FROM fuel_logs ORDER BY id LIMIT ?)",
                [.integer(Int64(rows))])
        }
        let committed = DispatchTime.now().uptimeNanoseconds
        while true {
            let left = try database.read { try $0.first("SELECT COUNT(*) FROM own_table_pending")?.int(0) ?? 0 }
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - committed) / 1e9
            if left == 0 { return seconds }
            if seconds > 1800 { throw CommandFailure("\(left) of \(rows) updated rows were not sequenced within 30 minutes.") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Seconds from `started` until the server marks the table's backfill
    /// done (read every 20 ms from another connection).
    static func backfillSeconds(_ database: PostgresDatabase, since started: UInt64, within limit: Double) async throws -> Double {
        while true {
            let done = try database.read { sql in
                try sql.first("SELECT backfill_done FROM own_tables WHERE collection = 'fuel_logs'")?.bool(0) ?? false
            }
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
            if done { return seconds }
            if seconds > limit { throw CommandFailure("The backfill did not finish within \(Int(limit)) s.") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// The table's copies as rows of a SQLite server database (as
    /// `people`, which the copy floor reads).
    static func copyToSQLite(from database: PostgresDatabase, to path: String) throws {
        let rows = try database.read { sql in
            try sql.query(
                "SELECT uuid, version, updated_at, owner, team, data FROM records WHERE collection = 'fuel_logs' ORDER BY version",
                [])
        }
        let target = try SQLiteServerDatabase(path: path)
        defer { target.close() }
        _ = try SyncServer(database: target, config: ServerConfig())
        for first in stride(from: 0, to: rows.count, by: 500) {
            try target.write { sql in
                let batch = rows[first..<min(rows.count, first + 500)]
                var arguments: [SQLValue] = []
                for row in batch {
                    arguments += [
                        .text(row.string(0)), .integer(row.int(1)), .text(row.string(2)), .text(row.string(3)), .text(row.string(4)),
                        .text(row.string(3)), .text(row.string(5)),
                    ]
                }
                _ = try sql.execute(
                    """
                    INSERT INTO records (collection, uuid, version, updated_at, deleted, owner, team, created_by_user,
                        created_by_client, data) VALUES \(batch.map { _ in "('people', ?, ?, ?, 0, ?, ?, ?, '', ?)" }.joined(separator: ", "))
                    """, arguments)
            }
        }
    }
}
