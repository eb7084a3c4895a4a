import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The real engine on two devices syncing a table of the app's own
/// PostgreSQL database, while the company's backend writes to it.
@Suite(
    "Syncing an app's own table", .timeLimit(.minutes(4)),
    .enabled(if: ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES_URL"] != nil, "needs scripts/with-postgres"))
struct OwnTableSyncTests {
    @Test func offlineCapturesLandInTheTableExactlyOnceWhileTheBackendWrites() async throws {
        let cluster = try #require(ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES_URL"])
        let name = "t_own_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12)
        try PostgresDatabase.clusterCommand("CREATE DATABASE \(name)", at: cluster)
        var components = try #require(URLComponents(string: cluster))
        components.path = "/\(name)"
        let url = try #require(components.string)
        let database = try PostgresDatabase(url: url, poolSize: 4)
        try database.write { sql in
            for statement in [
                """
                CREATE TABLE fuel_logs (id uuid PRIMARY KEY, user_id text NOT NULL, fleet_id text,
                    liters numeric(8,2) NOT NULL CHECK (liters > 0 AND liters < 500), price_per_liter numeric(6,3) NOT NULL,
                    total_cost numeric(10,2), note text)
                """,
                """
                CREATE FUNCTION fuel_total() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
                    NEW.total_cost := round(NEW.liters * NEW.price_per_liter, 2); RETURN NEW; END $$
                """,
                "CREATE TRIGGER fuel_total BEFORE INSERT OR UPDATE ON fuel_logs FOR EACH ROW EXECUTE FUNCTION fuel_total()",
            ] {
                try sql.execute(statement, [])
            }
        }
        let config = try ServerConfig(
            collections: DefaultCollections.all,
            tables: [
                TableMapping(
                    name: "fuel_logs", table: "public.fuel_logs", key: "id", ownerColumn: "user_id", teamColumn: "fleet_id",
                    readOnlyColumns: ["total_cost"])
            ])
        let server = try SyncServer(database: database, config: config)
        let http = try HTTPServer(port: 0, threads: 4) { server.handle($0) }
        defer {
            http.stop()
            database.close()
        }
        let base = URL(string: "http://127.0.0.1:\(http.port)")!
        let directory = try TemporaryDirectory()
        // Devices know the collection as the server serves it.
        let schema = try #require(server.config.collections["fuel_logs"])
        func device(_ name: String) throws -> (LocalStore, SyncEngine) {
            let store = try LocalStore(path: directory.path("\(name).sqlite"), collections: [CollectionDescriptor(schema: schema)])
            var options = SyncOptions()
            options.periodicInterval = nil
            let engine = SyncEngine(
                store: store, transport: URLSessionTransport(baseURL: base),
                token: try server.tokens.issue(user: "u-1", role: .field, team: "f-1", ttl: nil), options: options)
            return (store, engine)
        }
        let (phone, phoneEngine) = try device("phone")
        let (tablet, tabletEngine) = try device("tablet")

        // The phone captures offline; one capture breaks the table's CHECK.
        var captured: [UUID] = []
        for index in 1...20 {
            captured.append(try await phone.create(in: "fuel_logs", ["liters": .int(Int64(10 + index)), "price_per_liter": 2]))
        }
        let tooMuch = try await phone.create(in: "fuel_logs", ["liters": 900, "price_per_liter": 2])
        // Meanwhile the backend imports fills of its own.
        let backend = try PostgresDatabase(url: url, poolSize: 1)
        defer { backend.close() }
        _ = try backend.write { sql in
            try sql.execute(
                """
                INSERT INTO fuel_logs (id, user_id, fleet_id, liters, price_per_liter, note)
                SELECT gen_random_uuid(), 'u-1', 'f-1', 30, 1.5, 'fuel card ' || i FROM generate_series(1, 10) i
                """, [])
        }

        let sent = try await phoneEngine.sync()
        #expect(sent.confirmed == 20)
        let refusal = try #require(sent.rejected.first)
        #expect(refusal.record.uuid == tooMuch)
        #expect(refusal.rejection.code == "constraint_violation")
        #expect(refusal.rejection.message?.contains("fuel_logs_liters_check") == true, "the database's own words")
        #expect(refusal.rejection.errors.keys.sorted() == ["liters"])
        // Synced again (a lost answer would do the same): nothing lands twice.
        _ = try await phoneEngine.sync()
        let landed = try database.read { sql in
            try sql.first("SELECT count(*), count(DISTINCT id) FROM fuel_logs WHERE note IS NULL")?.values
        }
        #expect(landed == [.text("20"), .text("20")])

        // The tablet receives the phone's captures, with the totals the table's trigger computed, and the backend's.
        _ = try await tabletEngine.sync()
        let onTablet = try await tablet.query(RecordQuery("fuel_logs"))
        #expect(onTablet.count == 30, "20 captures and 10 imports")
        let first = try #require(onTablet.first { $0.uuid == captured[0] })
        #expect(first.value["total_cost"] == .int(22) || first.value["total_cost"] == .double(22))
        #expect(onTablet.filter { $0.value["note"]?.stringValue?.hasPrefix("fuel card") == true }.count == 10)
        await phoneEngine.stop()
        await tabletEngine.stop()
        await phone.close()
        await tablet.close()
    }
}
