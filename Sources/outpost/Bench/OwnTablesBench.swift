import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting

/// own-tables: a collection that is a table of the app's own PostgreSQL
/// database, each figure beside a floor measured in the same run:
/// - device pushes written into the table, against the same INSERTs through libpq;
/// - a device downloading rows that were in the table before Outpost came,
///   against SQLite copying the same rows;
/// - a row the backend writes reaching a live device, against a row another
///   device pushes reaching it;
/// - rows one backend statement updates, sequenced, against the backfill's pace.
enum OwnTablesBench {
    struct Sizes {
        var pushes: Int
        var existingRows: Int
        /// Existing rows the backend then updates in one statement.
        var bulkRows: Int
        var liveRounds: Int
    }

    static let batchSize = 500
    static let user = "bench"
    static let team = "t"

    static func run(postgres: String, sizes: Sizes) async throws -> [BenchResult] {
        var results = [try await pushIntake(postgres: postgres, mutations: sizes.pushes)]
        results += try await download(postgres: postgres, rows: sizes.existingRows, bulkRows: sizes.bulkRows)
        results.append(try await backendToDevice(postgres: postgres, rounds: sizes.liveRounds))
        return results
    }

    // MARK: The app's table

    /// Creates the app's `fuel_logs` table (and, with `name`, an identical
    /// one under that name) in the connection's schema: a CHECK, defaults,
    /// and a BEFORE trigger computing the total, as an app's table has.
    static func createAppTable(_ name: String = "fuel_logs", in database: any ServerDatabase) throws {
        _ = try database.write { sql in
            try sql.execute(
                """
                CREATE OR REPLACE FUNCTION fuel_log_total() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN NEW.total_cost := round(NEW.liters * NEW.price_per_liter, 2); RETURN NEW; END $$
                """, [])
            try sql.execute(
                """
                CREATE TABLE \(name) (id uuid PRIMARY KEY, user_id text NOT NULL, fleet_id text,
                    liters numeric(8,2) NOT NULL CHECK (liters > 0), price_per_liter numeric(6,3) NOT NULL,
                    total_cost numeric(10,2), filled_at timestamptz NOT NULL DEFAULT now(), note text)
                """, [])
            try sql.execute(
                "CREATE TRIGGER \(name)_total BEFORE INSERT OR UPDATE ON \(name) FOR EACH ROW EXECUTE FUNCTION fuel_log_total()", [])
        }
    }

    /// The mapping of `schema.fuel_logs`, as a configuration file gives it.
    static func mapping(schema: String) throws -> TableMapping {
        try TableMapping(
            name: "fuel_logs", table: "\(schema).fuel_logs", key: "id", ownerColumn: "user_id", teamColumn: "fleet_id",
            readOnlyColumns: ["total_cost"])
    }

    /// The configuration `writeConfig` writes, for a server in this process.
    static func mappedConfig(schema: String) throws -> ServerConfig {
        try ServerConfig(collections: [DefaultCollections.catalogs], tables: [try mapping(schema: schema)])
    }

    /// A configuration file mapping `schema.fuel_logs`, for `outpost serve
    /// --config`; with the catalogs every device's engine pulls.
    static func writeConfig(schema: String, to path: String) throws {
        let catalogs = String(decoding: try WireCoding.encode(DefaultCollections.catalogs), as: UTF8.self)
        let text = """
            {"collections": [\(catalogs), {"name": "fuel_logs", "table": "\(schema).fuel_logs", "key": "id",
              "owner_column": "user_id", "team_column": "fleet_id", "read_only_columns": ["total_cost"]}]}
            """
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    /// A fuel log's fields as a device sends them, made from its index.
    static func fuelLog(_ index: Int) -> JSONObject {
        [
            "liters": .double(Double(200 + index % 400) / 10),
            "price_per_liter": .double(1.5 + Double(index % 100) / 1000),
            "filled_at": .string(ServerTimestamp(Date(timeIntervalSince1970: 1_780_000_000 + Double(index) * 7)).rawValue),
            "note": .string("Filled at the depot on round \(index % 17); receipt kept in the glovebox until the month ends."),
        ]
    }

    /// A store on the device holding the mapped collection.
    static func deviceStore(_ path: String) throws -> LocalStore {
        try LocalStore(path: path, collections: [CollectionDescriptor(name: "fuel_logs")])
    }

    // MARK: Push intake

    static func pushIntake(postgres: String, mutations: Int) async throws -> BenchResult {
        let directory = try TemporaryDirectory(prefix: "outpost-bench-own")
        let schema = try ScratchSchema(on: postgres)
        defer { schema.drop() }
        let url = schema.url(postgres)
        let database = try PostgresDatabase(url: url, poolSize: 1)
        try createAppTable(in: database)
        try createAppTable("fuel_logs_floor", in: database)
        _ = try SyncServer(database: database, config: try mappedConfig(schema: schema.name))
        let token = try TokenStore(database: database).issue(user: user, role: .field, team: team, ttl: nil)

        // The median of three floors, the table emptied before each.
        let floorRuns = try (1...3).map { _ in try floor(database, rows: mutations) }.sorted()
        let floorSeconds = floorRuns[1]
        database.close()

        let config = directory.path("config.json")
        try writeConfig(schema: schema.name, to: config)
        let mapped = try await drain(
            url: url, token: token, extra: ["--config", config], directory: directory, name: "mapped", collection: "fuel_logs",
            count: mutations, fields: fuelLog)
        let check = try PostgresDatabase(url: url, poolSize: 1)
        let stored = try check.read { try $0.first("SELECT COUNT(*), COUNT(total_cost) FROM fuel_logs") }
        check.close()
        guard stored?.int(0) == Int64(mutations), stored?.int(1) == Int64(mutations) else {
            throw CommandFailure("The app's table holds \(stored?.int(0) ?? 0) rows of the \(mutations) pushed.")
        }
        // The same number of creates into a collection of Outpost's own
        // records on the same PostgreSQL: what the table's side adds.
        let plainSchema = try ScratchSchema(on: postgres)
        defer { plainSchema.drop() }
        let plainURL = plainSchema.url(postgres)
        let plainDatabase = try PostgresDatabase(url: plainURL, poolSize: 1)
        _ = try SyncServer(database: plainDatabase, config: ServerConfig())
        let plainToken = try TokenStore(database: plainDatabase).issue(user: user, role: .field, team: team, ttl: nil)
        plainDatabase.close()
        let plain = try await drain(
            url: plainURL, token: plainToken, extra: [], directory: directory, name: "records", collection: "people", count: mutations,
            fields: Bench.recordObject)

        let (serverSeconds, requests, seconds) = mapped
        let intake = Double(mutations) / serverSeconds
        let plainIntake = Double(mutations) / plain.serverSeconds
        let floorRate = Double(mutations) / floorSeconds
        var result = BenchResult(
            name: "own-tables-push", figure: intake, unit: "rows/s (server intake into the app's table)",
            baseline: floorRate,
            baselineLabel: "the same rows INSERTed through libpq into an identical table (same trigger, no Outpost triggers), one INSERT a row, \(batchSize) a transaction (median of three runs)",
            ratio: intake / floorRate, ratioMeaning: "server intake / floor", target: "at least 0.5x the floor",
            met: intake / floorRate >= 0.5)
        result.details = [
            "rows": Double(mutations), "push_requests": Double(requests), "server_seconds": serverSeconds,
            "floor_seconds": floorSeconds, "floor_seconds_fastest": floorRuns[0], "floor_seconds_slowest": floorRuns[2],
            "end_to_end_seconds": seconds, "end_to_end_rows_per_second": Double(mutations) / seconds,
            "records_collection_rows_per_second": plainIntake, "ratio_to_records_collection": intake / plainIntake,
        ]
        result.notes = [
            "creates of fuel logs (4 fields sent, total_cost computed by the table's trigger), batches of \(batchSize) over HTTP on loopback",
            "records_collection: the same number of creates of ~300-byte people into a collection of Outpost's own records, same PostgreSQL, same run",
        ]
        return result
    }

    /// A device's creates of `count` records of `collection`, drained to a
    /// fresh `outpost serve` in pushes of `batchSize`: the seconds the
    /// server spent answering them (its request log) and the device's whole sync.
    static func drain(
        url: String, token: String, extra: [String], directory: TemporaryDirectory, name: String, collection: String,
        count: Int, fields: @escaping @Sendable (Int) -> JSONObject
    ) async throws -> (serverSeconds: Double, requests: Int, seconds: Double) {
        let log = directory.path("\(name).log")
        let server = try ServerProcess(database: url, logPath: log, extra: extra)
        defer { server.stop() }
        let store = try LocalStore(path: directory.path("\(name).sqlite"), collections: [CollectionDescriptor(name: collection)])
        try await store.write { tx in
            for index in 0..<count { _ = try tx.create(in: collection, fields(index)) }
        }
        var options = SyncOptions()
        options.liveUpdates = false
        options.periodicInterval = nil
        options.pushBatchSize = batchSize
        options.requestTimeout = 120
        let engine = SyncEngine(store: store, transport: HTTPTransport.make(baseURL: server.url), token: token, options: options)
        let seconds = try await Bench.time { _ = try await engine.sync(timeout: .seconds(1800)) }
        let left = try await store.outboxEntries().count
        await engine.stop()
        await store.close()
        server.stop()
        guard left == 0 else { throw CommandFailure("\(left) of \(count) \(collection) creates were never confirmed.") }
        let (serverSeconds, requests) = ServerProcess.serverSeconds(log: log, path: "/v1/push")
        guard serverSeconds > 0 else { throw CommandFailure("The server's log holds no answered push.") }
        return (serverSeconds, requests, seconds)
    }

    /// The floor: the rows a push writes, INSERTed through libpq into a table
    /// alike in all but Outpost's triggers, one statement a row, as a backend
    /// would; the values made before the clock starts.
    static func floor(_ database: PostgresDatabase, rows count: Int) throws -> Double {
        _ = try database.write { try $0.execute("TRUNCATE fuel_logs_floor", []) }
        // Time-ordered keys, as the device's store makes them.
        let ids = UUIDv7Generator()
        let rows: [[SQLValue]] = (0..<count).map { index in
            let fields = fuelLog(index)
            func text(_ name: String) -> SQLValue {
                switch fields[name] {
                case .string(let value)?: return .text(value)
                case .double(let value)?: return .text("\(value)")
                default: return .null
                }
            }
            return [
                .text(ids.next().wireText), .text(user), .text(team), text("liters"), text("price_per_liter"),
                text("filled_at"), text("note"),
            ]
        }
        let start = DispatchTime.now().uptimeNanoseconds
        for first in stride(from: 0, to: count, by: batchSize) {
            try database.write { sql in
                for row in rows[first..<min(count, first + batchSize)] {
                    _ = try sql.execute(
                        """
                        INSERT INTO fuel_logs_floor (id, user_id, fleet_id, liters, price_per_liter, filled_at, note)
                        VALUES (CAST(? AS uuid), ?, ?, CAST(? AS numeric), CAST(? AS numeric), CAST(? AS timestamptz), ?)
                        """, row)
                }
            }
        }
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }
}
