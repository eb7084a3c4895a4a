import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// Collections on the app's own PostgreSQL tables, both halves real: the
/// app's schema (a constraint of each kind and a trigger computing a value)
/// made by SQL before the server starts, the backend's writes made through
/// its own connection, devices pushing and pulling over the socket.
@Suite(
    "The app's own tables", .timeLimit(.minutes(4)),
    .enabled(if: Backend.postgresURL != nil, "needs scripts/with-postgres"))
struct OwnTablesTests {
    static let van = "11111111-1111-4111-8111-111111111111"
    static let estate = "22222222-2222-4222-8222-222222222222"

    /// An app's schema Outpost never wrote, with rows from before it came.
    static let schema = [
        """
        CREATE TABLE vehicles (id uuid PRIMARY KEY, user_id text NOT NULL, fleet_id text, name text NOT NULL,
            plate text UNIQUE, odometer_km integer)
        """,
        """
        CREATE TABLE fuel_logs (id uuid PRIMARY KEY, user_id text NOT NULL, fleet_id text,
            vehicle_id uuid NOT NULL REFERENCES vehicles(id) ON DELETE CASCADE,
            liters numeric(8,2) NOT NULL CHECK (liters > 0 AND liters < 500), price_per_liter numeric(6,3) NOT NULL,
            total_cost numeric(10,2), filled_at timestamptz NOT NULL DEFAULT now(), note text, paid boolean DEFAULT false,
            extra jsonb)
        """,
        """
        CREATE FUNCTION fuel_total() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
            IF NEW.note = 'boom' THEN RAISE EXCEPTION 'a note may not say boom' USING COLUMN = 'note'; END IF;
            NEW.total_cost := round(NEW.liters * NEW.price_per_liter, 2); RETURN NEW; END $$
        """,
        "CREATE TRIGGER fuel_total BEFORE INSERT OR UPDATE ON fuel_logs FOR EACH ROW EXECUTE FUNCTION fuel_total()",
        "INSERT INTO vehicles VALUES ('\(van)', 'u-1', 't-1', 'Van', 'AB-123', 1000), ('\(estate)', 'u-2', 't-2', 'Estate', 'CD-456', 5)",
        """
        INSERT INTO fuel_logs (id, user_id, fleet_id, vehicle_id, liters, price_per_liter, filled_at, note)
        SELECT CAST(md5('log' || i) AS uuid), CASE WHEN i % 2 = 0 THEN 'u-1' ELSE 'u-2' END,
            CASE WHEN i % 2 = 0 THEN 't-1' ELSE 't-2' END, CASE WHEN i % 2 = 0 THEN CAST('\(van)' AS uuid) ELSE CAST('\(estate)' AS uuid) END,
            12.5, 1.799, TIMESTAMPTZ '2026-03-01 10:00:00+00' + i * INTERVAL '1 hour', 'old ' || i
        FROM generate_series(1, 2500) i
        """,
    ]

    /// Text that array literals and JSON must carry exactly: quotes, a
    /// backslash, commas, braces and the word NULL.
    static let awkward = #"full "tank", {a\b} NULL ü"#

    static func config() throws -> ServerConfig {
        try ServerConfig(
            collections: DefaultCollections.all,
            tables: [
                TableMapping(name: "vehicles", table: "public.vehicles", key: "id", ownerColumn: "user_id", teamColumn: "fleet_id"),
                TableMapping(
                    name: "fuel_logs", table: "public.fuel_logs", key: "id", ownerColumn: "user_id", teamColumn: "fleet_id",
                    readOnlyColumns: ["total_cost"], windowField: "filled_at",
                    declaredFields: ["liters": FieldSchema(.number, required: true)]),
            ])
    }

    static func server(config: ServerConfig? = nil, extra: [String] = []) throws -> LiveServer {
        try LiveServer(
            .postgres, config: try config ?? Self.config(),
            prepare: { database in
                try database.write { sql in for statement in schema + extra { try sql.execute(statement, []) } }
            })
    }

    /// Runs the backend's statements on a connection of its own, as the app's API would.
    static func backend(_ live: LiveServer, _ statements: String...) throws {
        let database = try PostgresDatabase(url: live.location, poolSize: 1, timeouts: .sharedTestDatabase)
        defer { database.close() }
        try database.write { sql in for statement in statements { try sql.execute(statement, []) } }
    }

    static func records(_ changes: [PullChange]) -> [String: WireRecord] {
        var found: [String: WireRecord] = [:]
        for case .record(let record) in changes { found[record.uuid.wireText] = record }
        return found
    }

    @Test func existingRowsAreDownloadedInTheirOwnersScopesWithExactValues() async throws {
        let live = try Self.server()
        try live.server.ownTables?.backfillAll()
        let ana = try live.token("u-1", team: "t-1")
        let (changes, _) = try await live.pullAll(token: ana, limit: 700, query: "&collections=fuel_logs,vehicles")
        let mine = Self.records(changes)
        #expect(mine.count == 1_251, "1,250 logs and one vehicle of u-1's, none of u-2's")
        #expect(mine.values.allSatisfy { $0.owner == "u-1" && $0.team == "t-1" })
        let log = try #require(mine.values.first { $0.collection == "fuel_logs" })
        #expect(log.data?["vehicle_id"] == .string(Self.van))
        #expect(log.data?["total_cost"] == .double(22.49), "computed by the table's trigger")
        // Numbers keep the column's exact decimal text on the wire, times are the server's format.
        let page = try await live.get("/v1/pull?collections=fuel_logs&limit=1", token: ana)
        #expect(page.text.contains("\"liters\": 12.50"), "\(page.text)")
        #expect(page.text.contains("\"price_per_liter\": 1.799"))
        #expect(page.text.range(of: #""filled_at": "2026-03-\d\dT\d\d:00:00\.000000Z""#, options: .regularExpression) != nil)
    }

    @Test func aDevicesChangesLandInTheTableWithTheValuesItsTriggersSet() async throws {
        let live = try Self.server()
        let ana = try live.token("u-1", team: "t-1")
        let phone = TestDevice()
        let uuid = UUID()
        let created = try await live.push(
            phone.request(
                phone.mutation(
                    .create, "fuel_logs", uuid: uuid,
                    data: [
                        "vehicle_id": .string(Self.van), "liters": 40, "price_per_liter": 1.5, "note": .string(Self.awkward),
                        "extra": ["pump": 4],
                    ])),
            token: ana)
        let applied = try #require(created.results.first)
        #expect(applied.status == .applied)
        #expect(applied.record?.data?["total_cost"] == .int(60) || applied.record?.data?["total_cost"] == .double(60))
        #expect(applied.record?.data?["paid"] == .bool(false), "the column's default")
        #expect(applied.record?.data?["extra"] == .object(["pump": 4]))
        #expect(applied.record?.owner == "u-1" && applied.record?.team == "t-1")

        let row = try live.database.read { sql in
            try sql.first(
                "SELECT user_id, fleet_id, CAST(liters AS text), CAST(total_cost AS text), note FROM fuel_logs WHERE id = CAST(? AS uuid)",
                [.text(uuid.wireText)])
        }
        #expect(row?.values == [.text("u-1"), .text("t-1"), .text("40.00"), .text("60.00"), .text(Self.awkward)])
        let queued = try live.database.read { try $0.first("SELECT count(*) FROM own_table_pending")?.int(0) }
        #expect(queued == 0, "Outpost's own write is not queued again by the trigger")

        // The backend edits a column the device does not send: an update of the sent fields keeps it.
        try Self.backend(live, "UPDATE fuel_logs SET paid = true WHERE id = '\(uuid.wireText)'")
        let version = try #require(applied.record?.version)
        let edited = try await live.push(
            phone.request(phone.mutation(.update, "fuel_logs", uuid: uuid, base: version, data: ["note": "half"])), token: ana)
        #expect(edited.results[0].status == .applied, "merge_fields: the backend changed another field")
        #expect(edited.results[0].record?.data?["paid"] == .bool(true))
        #expect(edited.results[0].record?.data?["note"] == .string("half"))

        let deleted = try await live.push(
            phone.request(phone.mutation(.delete, "fuel_logs", uuid: uuid, base: edited.results[0].record?.version)), token: ana)
        #expect(deleted.results[0].status == .applied)
        let left = try live.database.read { try $0.first("SELECT count(*) FROM fuel_logs WHERE id = CAST(? AS uuid)", [.text(uuid.wireText)])?.int(0) }
        #expect(left == 0)
    }

    @Test func eachRefusalOfTheTableIsRejectedWithItsMessageWhileTheRestOfTheBatchApplies() async throws {
        let live = try Self.server()
        let ana = try live.token("u-1", team: "t-1")
        let phone = TestDevice()
        func log(_ data: JSONObject) -> Mutation {
            var data = data
            if data["vehicle_id"] == nil { data["vehicle_id"] = .string(Self.van) }
            return phone.mutation(.create, "fuel_logs", data: data)
        }
        let check = log(["liters": 900, "price_per_liter": 2])
        let notNull = log(["liters": 10])
        let foreignKey = log(["liters": 10, "price_per_liter": 2, "vehicle_id": .string(UUID().wireText)])
        let raised = log(["liters": 10, "price_per_liter": 2, "note": "boom"])
        let good = log(["liters": 10, "price_per_liter": 2])
        let answer = try await live.push(
            phone.request(
                check, notNull, foreignKey, raised, good,
                phone.mutation(.create, "vehicles", data: ["name": "Copy", "plate": "AB-123"]),  // UNIQUE
                log(["liters": 10, "price_per_liter": 2, "total_cost": 1]),  // read-only column
                log(["liters": "ten", "price_per_liter": 2])  // the field's type
            ), token: ana)
        let results = answer.results
        #expect(results.map(\.status) == [.rejected, .rejected, .rejected, .rejected, .applied, .rejected, .rejected, .rejected])
        #expect(results[0].code == "constraint_violation")
        #expect(results[0].message?.contains("fuel_logs_liters_check") == true)
        #expect(results[0].errors?.keys.sorted() == ["liters"])
        #expect(results[1].code == "constraint_violation")
        #expect(results[1].errors?.keys.sorted() == ["price_per_liter"])
        #expect(results[2].code == "constraint_violation")
        #expect(results[2].errors?.keys.sorted() == ["vehicle_id"])
        #expect(results[3].code == "constraint_violation")
        #expect(results[3].message == "a note may not say boom")
        #expect(results[3].errors?.keys.sorted() == ["note"])
        #expect(results[5].code == "constraint_violation")
        #expect(results[5].errors?.keys.sorted() == ["plate"])
        #expect(results[6].code == "read_only_field")
        #expect(results[6].errors?.keys.sorted() == ["total_cost"])
        #expect(results[7].code == "invalid_field")
        let stored = try live.database.read { try $0.first("SELECT count(*) FROM fuel_logs WHERE user_id = 'u-1' AND note IS NULL")?.int(0) }
        #expect(stored == 1, "only the good capture is in the table")
        // The refusals are kept: sent again, each is answered as before, nothing applied twice.
        let again = try await live.push(PushRequest(clientID: phone.clientID, mutations: [good]), token: ana)
        #expect(again.results[0].status == .duplicate)
    }

    @Test func theBackendsWritesReachALiveDeviceAndAnOwnerChangeMovesTheRecord() async throws {
        let live = try Self.server()
        try live.server.ownTables?.backfillAll()
        let ana = try live.token("u-1", team: "t-1")
        let bruno = try live.token("u-2", team: "t-2")
        let (_, anaCursor) = try await live.pullAll(token: ana, query: "&collections=vehicles")
        let (_, brunoCursor) = try await live.pullAll(token: bruno, query: "&collections=vehicles")
        let cursor = try #require(anaCursor).rawValue
        let poll = Task { try await live.get("/v1/pull?collections=vehicles&cursor=\(cursor)&wait=30", token: ana) }
        try await Task.sleep(for: .milliseconds(200))
        let truck = UUID().wireText
        try Self.backend(live, "INSERT INTO vehicles (id, user_id, fleet_id, name) VALUES ('\(truck)', 'u-1', 't-1', 'Truck')")
        let woken = try await poll.value
        let page = try woken.decode(PullResponse.self)
        #expect(Self.records(page.changes)[truck]?.data?["name"] == .string("Truck"), "the backend's insert, live")

        // The backend gives the van to u-2: u-1 is told it is gone, u-2 receives it.
        try Self.backend(
            live, "UPDATE vehicles SET name = 'Van 2' WHERE id = '\(truck)'", "DELETE FROM vehicles WHERE id = '\(truck)'",
            "UPDATE vehicles SET user_id = 'u-2', fleet_id = 't-2' WHERE id = '\(Self.van)'")
        let changes = try await waitForChanges(live, token: ana, after: page.cursor, count: 2)
        #expect(changes.contains { $0 == .removed(collection: "vehicles", uuid: UUID.fromWire(Self.van)!) })
        #expect(Self.records(changes)[truck]?.deleted == true, "the backend's delete is a tombstone")
        let brunos = try await waitForChanges(live, token: bruno, after: brunoCursor, count: 1)
        #expect(Self.records(brunos)[Self.van]?.owner == "u-2")
    }

    /// Pulls from `cursor` until `count` changes arrived (the sequencer runs beside).
    func waitForChanges(_ live: LiveServer, token: String, after cursor: PullCursor?, count: Int) async throws -> [PullChange] {
        var changes: [PullChange] = []
        let deadline = ContinuousClock.now + .seconds(20)
        var cursor = cursor
        while changes.count < count {
            guard ContinuousClock.now < deadline else {
                Issue.record("waited 20 s for \(count) changes, got \(changes)")
                return changes
            }
            let (more, next) = try await live.pullAll(token: token, cursor: cursor, query: "&collections=vehicles")
            changes += more
            cursor = next
            if changes.count < count { try await Task.sleep(for: .milliseconds(50)) }
        }
        return changes
    }

    @Test func conflictsByFieldCountTheBackendsChanges() async throws {
        let live = try Self.server()
        let ana = try live.token("u-1", team: "t-1")
        let phone = TestDevice()
        let uuid = UUID()
        let created = try await live.push(
            phone.request(
                phone.mutation(.create, "fuel_logs", uuid: uuid, data: ["vehicle_id": .string(Self.van), "liters": 20, "price_per_liter": 2])),
            token: ana)
        let base = try #require(created.results[0].record?.version)
        // The backend corrects the liters; the trigger recomputes the total. Not sequenced yet:
        // the push itself must see it.
        try Self.backend(live, "UPDATE fuel_logs SET liters = 21 WHERE id = '\(uuid.wireText)'")
        let note = try await live.push(
            phone.request(phone.mutation(.update, "fuel_logs", uuid: uuid, base: base, data: ["note": "receipt lost"])), token: ana)
        #expect(note.results[0].status == .applied, "a field the backend did not change merges")
        #expect(note.results[0].record?.data?["liters"] == .int(21) || note.results[0].record?.data?["liters"] == .double(21))
        let liters = try await live.push(
            phone.request(phone.mutation(.update, "fuel_logs", uuid: uuid, base: base, data: ["liters": 25, "note": "x"])),
            token: ana)
        #expect(liters.results[0].status == .conflict)
        #expect(liters.results[0].fields == ["liters", "note"], "changed on both sides since the device's base")
        let row = try live.database.read { try $0.first("SELECT CAST(liters AS text) FROM fuel_logs WHERE id = CAST(? AS uuid)", [.text(uuid.wireText)])?.string(0) }
        #expect(row == "21.00", "nothing of the conflicting change applied")
    }

    /// Everything about the app's table a DBA would compare: rows, columns, constraints, indexes, triggers.
    static func describe(_ sql: any SQLExecutor) throws -> [String] {
        let queries = [
            "SELECT CAST(v AS text) FROM vehicles v ORDER BY id",
            "SELECT CAST(f AS text) FROM fuel_logs f ORDER BY id",
            "SELECT attrelid::regclass::text || '.' || attname || ' ' || format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid IN ('vehicles'::regclass, 'fuel_logs'::regclass) AND attnum > 0 ORDER BY 1",
            "SELECT conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid IN ('vehicles'::regclass, 'fuel_logs'::regclass) ORDER BY 1",
            "SELECT indexdef FROM pg_indexes WHERE tablename IN ('vehicles', 'fuel_logs') ORDER BY 1",
            "SELECT tgname FROM pg_trigger WHERE tgrelid IN ('vehicles'::regclass, 'fuel_logs'::regclass) AND NOT tgisinternal ORDER BY 1",
            "SELECT proname FROM pg_proc WHERE proname LIKE 'outpost%' ORDER BY 1",
        ]
        return try queries.flatMap { try sql.query($0, []).map { $0.string(0) } }
    }

    @Test func detachingLeavesTheTableExactlyAsItWas() async throws {
        let before = Locked<[String]>([])
        let live = try LiveServer(
            .postgres, config: try Self.config(),
            prepare: { database in
                try database.write { sql in for statement in Self.schema { try sql.execute(statement, []) } }
                before.withLock { $0 = (try? database.read(Self.describe)) ?? [] }
            })
        try live.server.ownTables?.backfillAll()
        let attached = try live.database.read(Self.describe)
        #expect(attached != before.current, "Outpost added its triggers")
        for name in ["fuel_logs", "vehicles"] { try OwnTables.detach(name, in: live.database) }
        #expect(try live.database.read(Self.describe) == before.current)
        let kept = try live.database.read { try $0.first("SELECT count(*) FROM records WHERE collection IN ('fuel_logs', 'vehicles')")?.int(0) }
        #expect(kept == 0, "Outpost's copies are gone too")
    }

    @Test func aScriptAppliedByHandIsFoundInPlaceAndNotInstalledAgain() throws {
        func functionVersions(_ database: any ServerDatabase) throws -> [String] {
            try database.read { try $0.query("SELECT CAST(xmin AS text) FROM pg_proc WHERE proname LIKE 'outpost%' ORDER BY proname", []).map { $0.string(0) } }
        }
        // An administrator applies what `outpost tables sql` prints, statement by statement, before any server starts.
        let applied = Locked<[String]>([])
        let live = try LiveServer(
            .postgres, config: try Self.config(),
            prepare: { database in
                try database.write { sql in for statement in Self.schema { try sql.execute(statement, []) } }
                let script = try OwnTables.script(for: try Self.config(), in: database)
                #expect(script.contains("CREATE TRIGGER \"outpost_fuel_logs_note\""))
                let tables = try OwnTables.resolve(try Self.config(), in: database)
                let schema = try OwnTables.outpostSchema(database)
                try database.write { sql in
                    for table in tables.values {
                        for statement in OwnTableSQL.installScript(
                            table, outpostSchema: schema, channel: PostgresCommitListener.channel(schema: schema))
                        {
                            try sql.execute(statement, [])
                        }
                    }
                }
                applied.withLock { $0 = (try? functionVersions(database)) ?? [] }
            })
        #expect(applied.current.count == 4, "two trigger functions per table, applied by hand")
        #expect(try functionVersions(live.database) == applied.current, "the server found the same mark and installed nothing")
        _ = try SyncServer(database: live.database, config: live.server.config)
        #expect(try functionVersions(live.database) == applied.current, "nor does a second start")
    }

    @Test func aTableOutpostCannotSyncStopsTheStartNamingTableColumnAndType() throws {
        func refusal(_ mapping: TableMapping, extra: [String] = []) throws -> String {
            let config = try ServerConfig(collections: DefaultCollections.all, tables: [mapping])
            do {
                _ = try Self.server(config: config, extra: extra)
                return "started"
            } catch let error as ConfigError {
                return error.description
            }
        }
        let missing = try refusal(TableMapping(name: "trips", table: "public.trips", key: "id", ownerColumn: "user_id"))
        #expect(missing.contains("public.trips") && missing.contains("does not exist"), "\(missing)")
        let column = try refusal(TableMapping(name: "vehicles", table: "public.vehicles", key: "id", ownerColumn: "owner"))
        #expect(column.contains("public.vehicles.owner") && column.contains("does not exist"), "\(column)")
        let type = try refusal(
            TableMapping(name: "places", table: "public.places", key: "id", ownerColumn: "user_id"),
            extra: ["CREATE TABLE places (id uuid PRIMARY KEY, user_id text NOT NULL, spot point)"])
        #expect(type.contains("public.places.spot") && type.contains("point"), "\(type)")
        let key = try refusal(
            TableMapping(name: "notes", table: "public.notes", key: "code", ownerColumn: "user_id"),
            extra: ["CREATE TABLE notes (id uuid PRIMARY KEY, code uuid, user_id text NOT NULL)"])
        #expect(key.contains("public.notes.code") && key.contains("primary key"), "\(key)")
        let sqlite = try ServerConfig(
            collections: DefaultCollections.all,
            tables: [TableMapping(name: "vehicles", table: "public.vehicles", key: "id", ownerColumn: "user_id")])
        #expect(throws: ConfigError.self) { _ = try LiveServer(.sqlite, config: sqlite) }
    }

    @Test func aTruncateOfTheTableIsATombstoneForEveryRow() async throws {
        let live = try Self.server()
        try live.server.ownTables?.backfillAll()
        try Self.backend(live, "TRUNCATE fuel_logs")
        try live.server.ownTables?.drain()
        let alive = try live.database.read { try $0.first("SELECT count(*) FROM records WHERE collection = 'fuel_logs' AND deleted = 0")?.int(0) }
        #expect(alive == 0)
    }

    @Test func theConfigurationFileNamesATableAsTheProtocolShowsIt() throws {
        let directory = try TemporaryDirectory(prefix: "own-config")
        let path = directory.path("outpost.json")
        try Data(
            #"""
            {"collections": [{"name": "fuel_logs", "table": "public.fuel_logs", "key": "id", "owner_column": "user_id",
              "team_column": "fleet_id", "window_field": "filled_at", "conflict": "merge_fields",
              "read_only_columns": ["total_cost"], "fields": {"liters": {"type": "number", "required": true}}}]}
            """#.utf8
        ).write(to: URL(fileURLWithPath: path))
        let config = try ServerConfig.load(path: path)
        let mapping = try #require(config.tableMappings["fuel_logs"])
        #expect(mapping.qualifiedName == "public.fuel_logs" && mapping.teamColumn == "fleet_id")
        #expect(mapping.readOnlyColumns == ["total_cost"] && mapping.policy == .mergeFields)
        try Data(#"{"collections": [{"name": "fuel_logs", "table": "public.fuel_logs", "key": "id"}]}"#.utf8)
            .write(to: URL(fileURLWithPath: path))
        #expect(throws: (any Error).self) { _ = try ServerConfig.load(path: path) }
    }

    @Test func anAdministratorsReassignmentChangesTheTablesOwnerColumns() async throws {
        let live = try Self.server()
        try live.server.ownTables?.backfillAll()
        let admin = try live.token("boss", .admin, team: "t-1")
        _ = try live.token("u-2", team: "t-2")
        let answer = try await live.send(
            "POST", "/v1/records/vehicles/\(Self.van)/assign", token: admin, body: Data(#"{"owner": "u-2", "team": "t-2"}"#.utf8))
        #expect(answer.status == 200, "\(answer.text)")
        let row = try live.database.read { try $0.first("SELECT user_id, fleet_id FROM vehicles WHERE id = CAST(? AS uuid)", [.text(Self.van)]) }
        #expect(row?.values == [.text("u-2"), .text("t-2")], "the table holds the owner, not only Outpost's copy")
        let copy = try live.database.read { try $0.first("SELECT owner, team FROM records WHERE uuid = ?", [.text(Self.van)]) }
        #expect(copy?.values == [.text("u-2"), .text("t-2")])
        try live.server.ownTables?.drain()
        let exits = try live.database.read { try $0.first("SELECT count(*) FROM scope_exits WHERE uuid = ?", [.text(Self.van)])?.int(0) }
        #expect(exits == 1, "u-1 is told once; the trigger did not queue Outpost's own write")
    }

    @Test func theCollectionsEndpointDescribesTheTablesFieldsAsReadFromTheirColumns() async throws {
        let live = try Self.server()
        let ana = try live.token("u-1", team: "t-1")
        let answer = try await live.get("/v1/collections", token: ana)
        #expect(answer.status == 200)
        let collections = try answer.decode(CollectionsResponse.self).collections
        #expect(collections.map(\.name) == ["catalogs", "fuel_logs", "people", "vehicles", "visits"])
        let logs = try #require(collections.first { $0.name == "fuel_logs" })
        #expect(logs.policy == .mergeFields, "the default for a table of the app's own")
        #expect(logs.windowField == "filled_at")
        #expect(logs.fields["liters"] == FieldSchema(.number, required: true), "declared in the configuration")
        #expect(logs.fields["price_per_liter"] == FieldSchema(.number))
        #expect(logs.fields["vehicle_id"] == FieldSchema(.reference(collection: "vehicles")), "a foreign key to a mapped table")
        #expect(logs.fields["paid"] == FieldSchema(.boolean))
        #expect(logs.fields["extra"] == FieldSchema(.json))
        #expect(logs.fields["filled_at"] == FieldSchema(.timestamp))
        #expect(logs.fields["id"] == nil && logs.fields["user_id"] == nil && logs.fields["fleet_id"] == nil)
        #expect(try await live.get("/v1/collections", token: nil).status == 401)
    }

    @Test func aPushMeetingARowTheBackfillHasNotReachedSeesIt() async throws {
        var config = try Self.config()
        config.sequencesInBackground = false
        let live = try Self.server(config: config)
        let ana = try live.token("u-1", team: "t-1")
        let phone = TestDevice()
        let copies = try live.database.read { try $0.first("SELECT count(*) FROM records WHERE collection = 'vehicles'")?.int(0) }
        #expect(copies == 0, "no backfill has run")
        let van = try #require(UUID.fromWire(Self.van))
        let again = try await live.push(
            phone.request(phone.mutation(.create, "vehicles", uuid: van, data: ["name": "Mine now"])), token: ana)
        #expect(again.results[0].status == .conflict, "the row is there: a create of its key conflicts, never a 5xx or a refusal")
        #expect(again.results[0].record?.data?["name"] == .string("Van"))
        let renamed = try await live.push(
            phone.request(phone.mutation(.update, "vehicles", uuid: van, data: ["name": "Van 1"])), token: ana)
        #expect(renamed.results[0].status == .applied)
        let name = try live.database.read { try $0.first("SELECT name FROM vehicles WHERE id = CAST(? AS uuid)", [.text(Self.van)])?.string(0) }
        #expect(name == "Van 1")
        // The backfill, when it comes, keeps the copy the push wrote.
        try live.server.ownTables?.backfillAll()
        let copy = try live.database.read { try $0.first("SELECT data FROM records WHERE uuid = ?", [.text(Self.van)])?.string(0) }
        #expect(copy?.contains("Van 1") == true)
    }

    @Test func aPhotoColumnNeedsItsBlobOnTheServerAsEverywhere() async throws {
        let config = try ServerConfig(
            collections: DefaultCollections.all,
            tables: [
                TableMapping(
                    name: "inspections", table: "public.inspections", key: "id", ownerColumn: "user_id",
                    declaredFields: ["photo": FieldSchema(.attachment)])
            ])
        let live = try Self.server(
            config: config, extra: ["CREATE TABLE inspections (id uuid PRIMARY KEY, user_id text NOT NULL, photo jsonb, note text)"])
        let ana = try live.token("u-1", team: "t-1")
        let phone = TestDevice()
        let photo: JSONValue = ["sha256": .string(String(repeating: "ab", count: 32)), "size": 10, "content_type": "image/jpeg"]
        let answer = try await live.push(
            phone.request(phone.mutation(.create, "inspections", data: ["photo": photo, "note": "gate"])), token: ana)
        #expect(answer.results[0].status == .rejected)
        #expect(answer.results[0].code == "missing_attachment", "a photo never uploaded is refused before the table sees it")
        let rows = try live.database.read { try $0.first("SELECT count(*) FROM inspections")?.int(0) }
        #expect(rows == 0)
    }
}
