import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A collection on the app's own table, under what production does to it:
/// backend writers committing out of order and rolling back beside several
/// servers, servers SIGKILLed while devices push and resend, and a server
/// killed halfway through giving the table's existing rows their copies.
/// Each test ends by comparing Outpost's copies (and what a device pulls)
/// with the table itself, row by row.
@Suite(
    "Own tables under faults",
    .enabled(if: Backend.postgresURL != nil, "needs scripts/with-postgres"),
    .timeLimit(.minutes(3))
)
struct OwnTablesUnderFaultsTests {
    static let createTable = """
        CREATE TABLE public.fuel_logs (
            id uuid PRIMARY KEY, user_id text NOT NULL, fleet_id text NOT NULL,
            liters integer NOT NULL, note text NOT NULL)
        """

    static func mapping() throws -> TableMapping {
        try TableMapping(name: "fuel_logs", table: "public.fuel_logs", key: "id", ownerColumn: "user_id", teamColumn: "fleet_id")
    }

    static let configFile = """
        {"collections": [{"name": "fuel_logs", "table": "public.fuel_logs", "key": "id",
            "owner_column": "user_id", "team_column": "fleet_id"}]}
        """

    /// A row of the table, or what a copy says it is.
    struct Row: Equatable, CustomStringConvertible {
        var owner: String
        var team: String
        var liters: Int64
        var note: String

        var description: String { "\(owner)/\(team) \(liters) '\(note)'" }

        /// What a copy's fields and scope say the row is; nil when its fields are not the table's columns.
        static func copy(owner: String, team: String, data: JSONObject?) -> Row? {
            guard let data, data.count == 2, case .int(let liters)? = data["liters"], case .string(let note)? = data["note"]
            else { return nil }
            return Row(owner: owner, team: team, liters: liters, note: note)
        }
    }

    /// The table as it is now, by key.
    static func tableRows(_ database: any ServerDatabase) throws -> [UUID: Row] {
        try database.read { sql in
            try sql.query("SELECT CAST(id AS text), user_id, fleet_id, liters, note FROM public.fuel_logs", []).reduce(
                into: [UUID: Row]()
            ) {
                $0[UUID(uuidString: $1.string(0))!] = Row(owner: $1.string(1), team: $1.string(2), liters: $1.int(3), note: $1.string(4))
            }
        }
    }

    /// Outpost's copies in `records`, by key (nil for a tombstone); fails on a copy whose data is not a row's.
    static func copies(_ database: any ServerDatabase) throws -> [UUID: Row?] {
        try database.read { sql in
            var copies: [UUID: Row?] = [:]
            for row in try sql.query(
                "SELECT uuid, owner, team, deleted, data FROM records WHERE collection = 'fuel_logs'", [])
            {
                let key = try #require(UUID(uuidString: row.string(0)))
                #expect(copies[key] == nil, "two copies of \(key)")
                if row.bool(3) {
                    copies[key] = .some(nil)
                } else {
                    let data = try WireCoding.decode(JSONObject.self, from: Data(row.string(4).utf8))
                    let copy = try #require(Row.copy(owner: row.string(1), team: row.string(2), data: data), "copy data \(row.string(4))")
                    copies[key] = copy
                }
            }
            return copies
        }
    }

    /// Rows written by others still waiting for their feed version.
    static func queued(_ database: any ServerDatabase) throws -> Int64 {
        try database.read { try $0.first("SELECT count(*) FROM own_table_pending")?.int(0) ?? -1 }
    }

    /// The differences between the table and `live` (the copies a reader or
    /// the database holds, tombstones left out), at most a few, in words.
    static func differences(table: [UUID: Row], live: [UUID: Row]) -> [String] {
        var problems: [String] = []
        for (key, row) in table where live[key] != row {
            problems.append("\(key): table \(row), copy \(live[key].map(\.description) ?? "none")")
        }
        for key in live.keys where table[key] == nil { problems.append("\(key): a copy of no row (\(live[key]!))") }
        return Array(problems.sorted().prefix(5))
    }

    /// Records an issue naming a few rows where `live` differs from `table`.
    static func expectSame(
        _ live: [UUID: Row], as table: [UUID: Row], _ what: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let found = differences(table: table, live: live)
        #expect(found.isEmpty, "\(what): \(found)", sourceLocation: sourceLocation)
    }

    /// A rolled-back writer's transaction.
    struct RollBack: Error {}

    // MARK: - 1. Backend writers, rollbacks, three servers

    /// Four backend connections write the table directly (inserts, updates,
    /// some handing rows to another user, deletes; one transaction in five
    /// rolled back, one in four held open while others commit), a device
    /// changes the same rows, and three servers' sequencers take turns. An
    /// admin tailing the servers in turn, seven changes a page, ends with
    /// exactly the table, never sees a rolled-back row or value, and never a
    /// version at or below one it had; a field user tailing the same way
    /// ends with exactly the rows it owns.
    @Test func backendWritersRollingBackBesideThreeServersLeaveNoGapInTheFeed() async throws {
        let first = try LiveServer(
            .postgres, config: try ServerConfig(tables: [Self.mapping()]),
            prepare: { database in _ = try database.write { try $0.execute(Self.createTable, []) } })
        let servers = [first, try LiveServer(sharing: first), try LiveServer(sharing: first)]
        let admin = try first.token("admin-1", .admin)
        let deviceToken = try first.token("u-1", .field, team: "fleet-1")
        let known = Locked<[UUID]>([])
        let doomedKeys = Locked<Set<UUID>>([])
        let doomedNotes = Locked<Set<String>>([])
        let committedTransactions = Locked(0)
        let caughtUp = ManagedFlag()
        let deviceRounds = 40

        /// One backend writer: its own connection, its own random sequence.
        @Sendable func backendWriter(_ index: Int) throws {
            let database = try PostgresDatabase(url: first.location, poolSize: 1, timeouts: .sharedTestDatabase)
            defer { database.close() }
            var seed = UInt64(20_261_205 + index * 7919)
            func roll() -> UInt64 {
                seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return seed >> 33
            }
            for round in 0..<40 {
                let kind = roll()
                let rollsBack = kind % 5 == 0
                let inserts = (0..<(1 + Int(roll() % 3))).map { _ in (UUID(), Int64(roll() % 1000)) }
                let pool = known.current
                // The newest rows are the hot ones, changed by every writer and the device.
                let hot = Array(pool.suffix(12))
                // Sorted, so two writers updating the same rows lock them in one order.
                let picked = hot.isEmpty ? [] : (0..<Int(roll() % 3)).map { _ in hot[Int(roll()) % hot.count] }
                let updates = Set(picked).sorted { $0.uuidString < $1.uuidString }
                // Some changes hand the row to the other user: the device and the field reader lose it, or get it.
                let flips = kind % 3 == 2
                let delete = !pool.isEmpty && kind % 7 == 3 ? pool[Int(roll()) % pool.count] : nil
                let hold = kind % 4 == 1 ? UInt32(3_000 + roll() % 12_000) : 0
                let note = rollsBack ? "doomed-\(index)-\(round)" : "backend-\(index)-\(round)"
                do {
                    try database.write { sql in
                        for (key, liters) in inserts {
                            try sql.execute(
                                """
                                INSERT INTO public.fuel_logs (id, user_id, fleet_id, liters, note)
                                VALUES (CAST(? AS uuid), ?, 'fleet-1', ?, ?)
                                """,
                                [.text(key.uuidString), .text("u-\(1 + liters % 2)"), .integer(liters), .text(note)])
                        }
                        for key in updates where key != delete {
                            let owner = flips ? ", user_id = CASE user_id WHEN 'u-1' THEN 'u-2' ELSE 'u-1' END" : ""
                            try sql.execute(
                                "UPDATE public.fuel_logs SET liters = liters + 1, note = ?\(owner) WHERE id = CAST(? AS uuid)",
                                [.text(note), .text(key.uuidString)])
                        }
                        if let delete {
                            try sql.execute("DELETE FROM public.fuel_logs WHERE id = CAST(? AS uuid)", [.text(delete.uuidString)])
                        }
                        // Held open while the other writers and the sequencers commit.
                        if hold > 0 { usleep(hold) }
                        if rollsBack { throw RollBack() }
                    }
                    committedTransactions.withLock { $0 += 1 }
                    known.withLock { $0 += inserts.map(\.0) }
                } catch is RollBack {
                    doomedKeys.withLock { $0.formUnion(inserts.map(\.0)) }
                    doomedNotes.withLock { _ = $0.insert(note) }
                }
            }
        }

        let backend = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<4 { group.addTask { try await runBlocking { try backendWriter(index) } } }
                try await group.waitForAll()
            }
        }

        // A device edits rows the backend wrote (and makes its own) through
        // the servers in turn, so pushes meet the sequencers on the same rows.
        let deviceWrites = Task { () throws -> [MutationStatus] in
            let device = TestDevice()
            var statuses: [MutationStatus] = []
            for round in 0..<deviceRounds {
                var mutations = [
                    device.mutation(.create, "fuel_logs", data: ["liters": .int(Int64(round)), "note": .string("device-\(round)")])
                ]
                let hot = known.current.suffix(12)
                if !hot.isEmpty {
                    let target = hot[hot.startIndex + (round * 7) % hot.count]
                    mutations.append(
                        device.mutation(.update, "fuel_logs", uuid: target, data: ["note": .string("device-edit-\(round)")]))
                }
                let answer = try await servers[round % servers.count].push(
                    PushRequest(clientID: device.clientID, mutations: mutations), token: deviceToken)
                statuses += answer.results.map(\.status)
                try await Task.sleep(for: .milliseconds(3))
            }
            return statuses
        }

        struct Tail {
            /// Each record the reader holds, as its last change left it (tombstones too).
            var latest: [UUID: WireRecord] = [:]
            var seen: [WireRecord] = []
            var removals = 0
            var pages = 0
            var problems: [String] = []
        }
        /// Tails the feed through the servers in turn, seven changes a page, keeping its cursor.
        @Sendable func tail(_ token: String) -> Task<Tail, any Error> {
            Task {
                var tail = Tail()
                var cursor: PullCursor?
                var position: Int64 = -1
                while true {
                    // Whether the last pass starts after the queue was found empty.
                    let last = caughtUp.isSet
                    while true {
                        var target = "/v1/pull?collections=fuel_logs&limit=7"
                        if let cursor { target += "&cursor=\(cursor.rawValue)" }
                        let response = try await servers[tail.pages % servers.count].get(target, token: token)
                        guard response.status == 200 else {
                            tail.problems.append("pull answered \(response.status): \(response.text)")
                            return tail
                        }
                        let page = try response.decode(PullResponse.self)
                        tail.pages += 1
                        for change in page.changes {
                            guard let record = change.record else {
                                tail.latest[change.uuid] = nil
                                tail.removals += 1
                                continue
                            }
                            if record.version <= position {
                                tail.problems.append("version \(record.version) of \(record.uuid) after \(position)")
                            }
                            position = max(position, record.version)
                            tail.latest[record.uuid] = record
                            tail.seen.append(record)
                        }
                        let next = try GapFreeFeedTests.version(of: page.cursor)
                        if next < position { tail.problems.append("the cursor \(next) is below a version it handed out (\(position))") }
                        position = max(position, next)
                        cursor = page.cursor
                        if !page.hasMore { break }
                    }
                    if last { return tail }
                    try await Task.sleep(for: .milliseconds(3))
                }
            }
        }
        let reader = tail(admin)
        let fieldReader = tail(deviceToken)

        try await backend.value(within: .seconds(120), "the backend writers finished")
        let statuses = try await deviceWrites.value(within: .seconds(60), "the device's pushes were answered")
        // Whatever a server's timer has not sequenced yet is, now.
        try await eventually("every queued row has its version", timeout: .seconds(30)) {
            try await runBlocking { _ = try first.server.ownTables?.drain() }
            return try Self.queued(first.database) == 0
        }
        caughtUp.set()
        let tail = try await reader.value(within: .seconds(60), "the reader caught up")
        let fieldTail = try await fieldReader.value(within: .seconds(60), "the field reader caught up")

        let table = try Self.tableRows(first.database)
        /// The rows a reader holds (tombstones left out); records whose fields are not the table's columns go to `unreadable`.
        func live(_ tail: Tail, _ unreadable: inout [String]) -> [UUID: Row] {
            var live: [UUID: Row] = [:]
            for (key, record) in tail.latest where !record.deleted {
                guard let row = Row.copy(owner: record.owner, team: record.team, data: record.data) else {
                    unreadable.append("\(key): \(String(describing: record.data))")
                    continue
                }
                live[key] = row
            }
            return live
        }
        var unreadable: [String] = []
        let adminLive = live(tail, &unreadable)
        let fieldLive = live(fieldTail, &unreadable)
        #expect(tail.problems.isEmpty, "the reader: \(tail.problems.prefix(5))")
        #expect(fieldTail.problems.isEmpty, "the field reader: \(fieldTail.problems.prefix(5))")
        #expect(tail.removals == 0, "an admin was told a record left its scope")
        #expect(unreadable.isEmpty, "copies whose fields are not the table's columns: \(unreadable.prefix(3))")
        Self.expectSame(adminLive, as: table, "the reader's copies differ from the table")
        #expect(adminLive.count == table.count, "the reader holds \(adminLive.count) rows, the table \(table.count)")
        // The field reader holds exactly u-1's rows: those handed to u-2 left it, those handed to u-1 arrived.
        let owned = table.filter { $0.value.owner == "u-1" }
        Self.expectSame(fieldLive, as: owned, "the field reader's copies differ from u-1's rows")
        #expect(fieldTail.removals > 0, "rows changed owner while the field reader held them")
        let ghosts = tail.seen.filter { doomedKeys.current.contains($0.uuid) }
        #expect(ghosts.isEmpty, "rows of rolled-back transactions reached the feed: \(ghosts.prefix(3).map(\.uuid))")
        let rolledBackValues = tail.seen.filter { $0.data?["note"]?.stringValue.map(doomedNotes.current.contains) == true }
        #expect(rolledBackValues.isEmpty, "values of rolled-back transactions reached the feed: \(rolledBackValues.prefix(3).map(\.uuid))")
        // The run did what it claims: rollbacks, deletes and device writes happened.
        #expect(!doomedNotes.current.isEmpty && committedTransactions.current > 100)
        #expect(table.count < known.current.count + deviceRounds, "some rows were deleted")
        // Forty creates, and edits of the backend's rows (some of them the device does not own, or deleted meanwhile).
        #expect(statuses.filter { $0 == .applied }.count > deviceRounds, "the device's writes applied: \(statuses)")
        #expect(!statuses.contains(.rejected), "a device write was refused: \(statuses)")
        print(
            "OwnTablesUnderFaults: \(table.count) rows, \(committedTransactions.current) backend commits, "
                + "\(doomedNotes.current.count) rollbacks, \(tail.seen.count) changes in \(tail.pages) pages, "
                + "\(fieldTail.removals) removals for the field reader")
    }

    /// A backend transaction changes a row and stays open; a device's
    /// change of the same field, made from the version before, arrives and
    /// waits for the row. When the backend commits, the push must see its
    /// write (queued by the trigger in that very transaction) and answer
    /// `conflict` naming the field, not overwrite what the backend wrote.
    @Test func aPushWaitingForABackendTransactionSeesItsWrite() async throws {
        let server = try LiveServer(
            .postgres, config: try ServerConfig(tables: [Self.mapping()]),
            prepare: { database in _ = try database.write { try $0.execute(Self.createTable, []) } })
        let token = try server.token("u-1", .field, team: "fleet-1")
        let device = TestDevice()
        let key = UUID()
        let created = try await server.push(
            device.request(device.mutation(.create, "fuel_logs", uuid: key, data: ["liters": .int(10), "note": .string("first")])),
            token: token)
        let base = try #require(created.results.first?.record?.version, "the create applied: \(created.results)")

        let backend = try PostgresConnection(
            url: server.location, redactedURL: "the test database", timeouts: .sharedTestDatabase, failureKind: .failure)
        defer { backend.rollback(); backend.finish() }
        try backend.command("BEGIN")
        try backend.command("UPDATE public.fuel_logs SET note = 'backend' WHERE id = '\(key.uuidString.lowercased())'")
        let request = device.request(device.mutation(.update, "fuel_logs", uuid: key, base: base, data: ["note": .string("device")]))
        let push = Task { try await server.push(request, token: token) }
        try await eventually("the push waits for the backend's row lock", timeout: .seconds(30)) {
            try server.database.read { sql in
                try sql.first(
                    """
                    SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                    WHERE NOT l.granted AND l.locktype = 'transactionid' AND a.datname = current_database()
                    """)?.int(0) ?? 0
            } > 0
        }
        try backend.command("COMMIT")
        let answer = try #require(try await push.value(within: .seconds(30), "the push was answered").results.first)
        #expect(
            answer.status == .conflict && answer.fields == ["note"],
            "the device's stale change: \(answer.status) \(answer.fields ?? [])")
        #expect(try Self.tableRows(server.database)[key]?.note == "backend", "the backend's committed write was overwritten")
        try await eventually("the backend's write has its version", timeout: .seconds(30)) {
            try await runBlocking { _ = try server.server.ownTables?.drain() }
            return try Self.queued(server.database) == 0
        }
        let table = try Self.tableRows(server.database)
        let copies = try Self.copies(server.database).compactMapValues { $0 }
        Self.expectSame(copies, as: table, "the copies differ from the table")
    }

    /// Two servers start together over a table of 7,000 rows and take
    /// turns at its backfill while a backend connection inserts, updates and
    /// deletes rows all through it: every row ends with exactly one copy,
    /// with its final values, each at a version of its own, and a device
    /// pulling from scratch gets exactly the table.
    @Test func twoServersStartingTogetherBackfillOnceWhileTheBackendWrites() async throws {
        let mapping = try Self.mapping()
        let first = try LiveServer(
            .postgres, config: try ServerConfig(tables: [mapping]),
            prepare: { database in
                _ = try database.write { sql in
                    try sql.execute(Self.createTable, [])
                    try sql.execute(
                        """
                        INSERT INTO public.fuel_logs (id, user_id, fleet_id, liters, note)
                        SELECT gen_random_uuid(), 'u-' || (g % 3), 'fleet-1', g, 'existing ' || g FROM generate_series(1, 7000) g
                        """, [])
                }
            })
        let second = try LiveServer(sharing: first)
        let admin = try first.token("admin-1", .admin)
        let backend = Task {
            try await runBlocking {
                let database = try PostgresDatabase(url: first.location, poolSize: 1, timeouts: .sharedTestDatabase)
                defer { database.close() }
                var rounds = 0
                // Until the backfill is done, and at least a few rounds.
                while try rounds < 5 || !Self.backfill(first.database).done {
                    rounds += 1
                    try database.write { sql in
                        try sql.execute(
                            """
                            INSERT INTO public.fuel_logs (id, user_id, fleet_id, liters, note)
                            VALUES (gen_random_uuid(), 'u-1', 'fleet-1', ?, 'during')
                            """,
                            [.integer(Int64(100_000 + rounds))])
                        try sql.execute(
                            "UPDATE public.fuel_logs SET liters = liters + 1, note = 'changed during' WHERE liters % 97 = ?",
                            [.integer(Int64(rounds % 97))])
                        try sql.execute("DELETE FROM public.fuel_logs WHERE liters = ?", [.integer(Int64(rounds * 53 % 7000))])
                    }
                    usleep(2_000)
                }
                return rounds
            }
        }
        let rounds = try await backend.value(within: .seconds(120), "the backend wrote until the backfill was done")
        try await eventually("every queued row has its version", timeout: .seconds(30)) {
            try await runBlocking { _ = try second.server.ownTables?.drain() }
            return try Self.queued(first.database) == 0
        }
        let table = try Self.tableRows(first.database)
        let copies = try Self.copies(first.database)
        let live = copies.compactMapValues { $0 }
        Self.expectSame(live, as: table, "the copies differ from the table")
        #expect(live.count == table.count)
        let versions = try first.database.read { sql in
            try sql.first("SELECT count(DISTINCT version), count(*) FROM records WHERE collection = 'fuel_logs'")
        }
        #expect(versions.map { $0.int(0) == $0.int(1) } == true, "two copies share a version: \(String(describing: versions))")
        var pulled: [UUID: Row] = [:]
        for change in try await second.pullAll(token: admin, query: "&collections=fuel_logs").changes {
            guard let record = change.record else { continue }
            pulled[record.uuid] = record.deleted ? nil : Row.copy(owner: record.owner, team: record.team, data: record.data)
        }
        Self.expectSame(pulled, as: table, "a device pulling from scratch gets a different table")
        print("OwnTablesUnderFaults (two servers backfilling): \(table.count) rows, \(rounds) backend transactions during the backfill")
    }

    // MARK: - Real processes

    /// A fresh database holding the table, and a configuration file mapping it.
    static func processSetUp(_ directory: TemporaryDirectory, prepare: String...) throws
        -> (database: any ServerDatabase, location: String, config: String)
    {
        let (database, location) = try Backend.postgres.makeDatabase(in: directory)
        try database.write { sql in
            try sql.execute(Self.createTable, [])
            for statement in prepare { try sql.execute(statement, []) }
        }
        let config = directory.path("outpost.json")
        try Data(Self.configFile.utf8).write(to: URL(fileURLWithPath: config))
        return (database, location, config)
    }

    static func issue(_ location: String, _ user: String, _ role: String, team: String = "fleet-1") async throws -> String {
        try await runBlocking {
            try OutpostProcess.run(["token", "issue", "--database", location, "--user", user, "--role", role, "--team", team])
        }.split(separator: "\n").last.map(String.init) ?? ""
    }

    /// Every fuel log a server's feed holds now, as a device pulling from scratch gets them (tombstones left out).
    static func pullAll(_ server: RunningServer, token: String) async throws -> [UUID: Row] {
        var live: [UUID: Row] = [:]
        var cursor: String?
        for _ in 0..<1_000 {
            var target = "/v1/pull?collections=fuel_logs&limit=1000"
            if let cursor { target += "&cursor=\(cursor)" }
            var request = URLRequest(url: URL(string: target, relativeTo: server.base)!)
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            request.timeoutInterval = 60
            let (data, _) = try await TestSession.shared.data(for: request)
            let page = try WireCoding.decode(PullResponse.self, from: data)
            for record in page.changes.compactMap(\.record) {
                if record.deleted {
                    live[record.uuid] = nil
                } else {
                    let row = try #require(
                        Row.copy(owner: record.owner, team: record.team, data: record.data), "pulled \(String(describing: record.data))")
                    live[record.uuid] = row
                }
            }
            cursor = page.cursor.rawValue
            if !page.hasMore { return live }
        }
        throw WaitTimedOut("the pull reached the feed's end within 1,000 pages", timeout: .zero)
    }

    // MARK: - 2. Exactly once through kills and lost answers

    /// Two devices push creates into the table through `outpost serve`,
    /// each push also changing the rows of the one before, while the server
    /// is SIGKILLed and restarted every few hundred milliseconds; a push
    /// whose answer is lost (the server died, or the answer is thrown away
    /// on purpose) is sent again with the same mutations until answered.
    /// Every row is in the table once, with the values sent, its copy beside
    /// it; the table's own trigger saw each create and change once; every
    /// answer is `applied` or `duplicate`.
    @Test func pushesResentThroughKilledServersWriteEachRowOnce() async throws {
        let directory = try TemporaryDirectory()
        // The app's own trigger keeps a line per write it sees: each create and each change must run once.
        let (database, location, config) = try Self.processSetUp(
            directory,
            prepare: "CREATE TABLE public.fuel_log_audit (n bigserial PRIMARY KEY, id uuid NOT NULL, op text NOT NULL)",
            """
            CREATE FUNCTION public.fuel_log_audit() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO public.fuel_log_audit (id, op) VALUES (NEW.id, TG_OP);
                RETURN NULL;
            END
            $$
            """,
            """
            CREATE TRIGGER fuel_log_audit AFTER INSERT OR UPDATE ON public.fuel_logs
                FOR EACH ROW EXECUTE FUNCTION public.fuel_log_audit()
            """)
        defer { database.close() }
        let tokens = [try await Self.issue(location, "u-1", "field"), try await Self.issue(location, "u-2", "field")]
        @Sendable func serve() throws -> RunningServer { try OutpostProcess.serve(location, extra: ["--config", config]) }
        let current = Locked(try await runBlocking { try serve() })
        defer { current.current.stop() }
        let done = ManagedFlag()
        // A failing test stops the killer too.
        defer { done.set() }
        let kills = Locked(0)
        let resent = Locked(0)

        let answered = Locked(0)

        // Kills follow the devices' progress (one every six answered pushes), so
        // every run has several whatever the machine's speed; each lands a few
        // milliseconds after an answer, while the next pushes are in flight.
        let killer = Task {
            var round = 0
            while !done.isSet {
                while answered.current < 3 + round * 6 && !done.isSet { try await Task.sleep(for: .milliseconds(2)) }
                if done.isSet { break }
                try await Task.sleep(for: .milliseconds(1 + (round * 7) % 25))
                let victim = current.current
                victim.process.signal(SIGKILL)
                victim.process.waitUntilExit()
                kills.withLock { $0 += 1 }
                let replacement = try await runBlocking { try serve() }
                current.withLock { $0 = replacement }
                round += 1
            }
        }

        struct Sent: Sendable {
            var rows: [UUID: Row] = [:]
            var updated: Set<UUID> = []
            var statuses: [MutationStatus] = []
            var problems: [String] = []
        }
        let devices = (0..<2).map { index in
            Task { () throws -> Sent in
                let device = TestDevice()
                var sent = Sent()
                var previous: [UUID] = []
                for batch in 0..<16 {
                    let created = (0..<5).map { item in
                        let row = Row(
                            owner: "u-\(index + 1)", team: "fleet-1", liters: Int64(batch * 10 + item), note: "d\(index)-\(batch)-\(item)")
                        return (UUID(), row)
                    }
                    var mutations = created.map { key, row in
                        device.mutation(.create, "fuel_logs", uuid: key, data: ["liters": .int(row.liters), "note": .string(row.note)])
                    }
                    // The previous batch's rows are changed too: a change applied twice would show in the audit table.
                    var expected = Dictionary(uniqueKeysWithValues: created)
                    for key in previous {
                        var row = try #require(sent.rows[key])
                        row.liters += 1_000
                        expected[key] = row
                        mutations.append(device.mutation(.update, "fuel_logs", uuid: key, data: ["liters": .int(row.liters)]))
                    }
                    let request = PushRequest(clientID: device.clientID, mutations: mutations)
                    // Every third batch's first answer is thrown away, as a dropped connection would.
                    var answersToLose = batch % 3 == 0 ? 1 : 0
                    var attempt = 0
                    while true {
                        attempt += 1
                        do {
                            let answer = try await current.current.push(request, token: tokens[index])
                            if answersToLose > 0 {
                                answersToLose -= 1
                                resent.withLock { $0 += 1 }
                                continue
                            }
                            answered.withLock { $0 += 1 }
                            sent.statuses += answer.results.map(\.status)
                            for result in answer.results where !result.status.isSuccess {
                                sent.problems.append("seq \(result.seq): \(result.status) \(result.code ?? "") \(result.message ?? "")")
                            }
                            for result in answer.results where result.status == .applied {
                                let record = try #require(result.record)
                                if Row.copy(owner: record.owner, team: record.team, data: record.data) != expected[record.uuid] {
                                    sent.problems.append("\(record.uuid): answered \(String(describing: record.data))")
                                }
                            }
                            break
                        } catch {
                            // The server died with the push in flight, or is starting: the same push again.
                            resent.withLock { $0 += 1 }
                            guard attempt < 200 else { throw error }
                            try await Task.sleep(for: .milliseconds(20))
                        }
                    }
                    sent.rows.merge(expected) { _, new in new }
                    sent.updated.formUnion(previous)
                    previous = created.map(\.0)
                }
                return sent
            }
        }
        var sent = Sent()
        for device in devices {
            let one = try await device.value(within: .seconds(120), "a device's pushes were all answered")
            sent.rows.merge(one.rows) { first, _ in first }
            sent.updated.formUnion(one.updated)
            sent.statuses += one.statuses
            sent.problems += one.problems
        }
        done.set()
        try await killer.value(within: .seconds(60), "the killer stopped")

        #expect(sent.problems.isEmpty, "answers: \(sent.problems.prefix(5))")
        #expect(sent.statuses.contains(.duplicate), "a resent push met mutations that had applied")
        #expect(kills.current >= 4, "the server was killed \(kills.current) times")
        let counts = try database.read { sql in
            try sql.query("SELECT CAST(id AS text), count(*) FROM public.fuel_logs GROUP BY id", []).map { $0.int(1) }
        }
        #expect(
            counts.count == sent.rows.count && counts.allSatisfy { $0 == 1 },
            "\(counts.count) keys in the table for \(sent.rows.count) creates")
        let table = try Self.tableRows(database)
        Self.expectSame(table, as: sent.rows, "the table differs from what was sent")
        let copies = try Self.copies(database).compactMapValues { $0 }
        Self.expectSame(copies, as: table, "the copies differ from the table")
        // Pushes mark their own writes: the trigger queued none of them.
        #expect(try Self.queued(database) == 0)
        let created = try database.read { sql in
            try sql.first("SELECT count(*) FROM record_history WHERE collection = 'fuel_logs' AND op = 'create'")?.int(0)
        }
        #expect(created == Int64(sent.rows.count), "one create in the history per row")
        let audit = try database.read { sql in
            try sql.query("SELECT CAST(id AS text), op, count(*) FROM public.fuel_log_audit GROUP BY id, op", []).map {
                "\($0.string(0).uppercased()) \($0.string(1)) \($0.int(2))"
            }
        }
        let expectedAudit = sent.rows.keys.map { "\($0.uuidString) INSERT 1" } + sent.updated.map { "\($0.uuidString) UPDATE 1" }
        let wrongAudit = Set(audit).symmetricDifference(expectedAudit).sorted()
        #expect(
            audit.count == expectedAudit.count && wrongAudit.isEmpty,
            "the table's trigger did not see each write once: \(wrongAudit.prefix(5))")
        #expect(sent.updated.count == 2 * 15 * 5)
        print("OwnTablesUnderFaults (SIGKILL): \(sent.rows.count) creates, \(kills.current) kills, \(resent.current) pushes resent")
    }

    // MARK: - 3. A backfill killed halfway

    /// Where a mapped table's existing rows stand: the last key given a copy, and whether all have one.
    static func backfill(_ database: any ServerDatabase) throws -> (through: String?, done: Bool) {
        let row = try #require(
            try database.read {
                try $0.first("SELECT backfilled_through, CAST(backfill_done AS integer) FROM own_tables WHERE collection = 'fuel_logs'")
            }, "own_tables has a row for fuel_logs")
        return (row.optionalString(0), row.int(1) != 0)
    }

    /// How many copies (tombstones too) Outpost holds for the table.
    static func copyCount(_ database: any ServerDatabase) throws -> Int64 {
        try database.read { try $0.first("SELECT count(*) FROM records WHERE collection = 'fuel_logs'")?.int(0) ?? -1 }
    }

    /// A table of 9,000 rows is mapped by `outpost serve`, which is
    /// SIGKILLed after its first batch of copies and before its second;
    /// the backend inserts, updates (owners too) and deletes rows while no
    /// server runs, and again while the next server is halfway through.
    /// That server goes on from the first batch's end: in the end every row
    /// has exactly one copy, with its final values, and a device pulling
    /// from scratch gets exactly the table.
    @Test func aServerKilledMidBackfillGoesOnFromItsLastBatch() async throws {
        let directory = try TemporaryDirectory()
        let (database, location, config) = try Self.processSetUp(
            directory,
            prepare: """
                INSERT INTO public.fuel_logs (id, user_id, fleet_id, liters, note)
                SELECT gen_random_uuid(), 'u-' || (g % 5), 'fleet-' || (g % 2), g, 'existing ' || g FROM generate_series(1, 9000) g
                """)
        defer { database.close() }
        let admin = try await Self.issue(location, "admin-1", "admin")
        let batch = Int64(OwnTableSequencer.rowsPerBackfillBatch)
        let lock = try SequencerLock(location)
        defer { lock.finish() }
        @Sendable func serve() throws -> RunningServer { try OutpostProcess.serve(location, extra: ["--config", config]) }

        // The first server copies one batch, and is killed waiting to copy the next.
        let killed = try await runBlocking { try serve() }
        defer { killed.stop() }
        try await eventually("the first server's backfill waits for the sequencer's lock", timeout: .seconds(30)) {
            try !lock.waiters(database).isEmpty
        }
        try await lock.letOneBatchThrough()
        try await eventually("the first server asks for the lock for its second batch", timeout: .seconds(30)) {
            try !lock.waiters(database).isEmpty
        }
        let abandoned = Set(try lock.waiters(database))
        killed.process.signal(SIGKILL)
        killed.process.waitUntilExit()
        let afterKill = try Self.backfill(database)
        #expect(afterKill.through != nil && !afterKill.done, "the kill came after one batch: \(afterKill)")
        #expect(try Self.copyCount(database) == batch, "one batch of copies before the kill")

        // The backend goes on writing while no server runs.
        try database.write { sql in
            try sql.execute(
                """
                INSERT INTO public.fuel_logs (id, user_id, fleet_id, liters, note)
                SELECT gen_random_uuid(), 'u-1', 'fleet-1', 100000 + g, 'inserted between' FROM generate_series(1, 30) g
                """, [])
            try sql.execute("UPDATE public.fuel_logs SET liters = liters + 500000, note = 'updated between' WHERE liters % 300 = 7", [])
            try sql.execute("UPDATE public.fuel_logs SET user_id = 'u-9', fleet_id = 'fleet-9' WHERE liters % 1000 = 13", [])
            try sql.execute("DELETE FROM public.fuel_logs WHERE liters % 450 = 11", [])
        }

        // The next server goes on from there: one batch more, then it waits, while the backend writes again.
        let server = try await runBlocking { try serve() }
        defer { server.stop() }
        try await eventually("the second server's backfill waits for the sequencer's lock", timeout: .seconds(30)) {
            try !Set(lock.waiters(database)).subtracting(abandoned).isEmpty
        }
        try await lock.letOneBatchThrough()
        let halfway = try Self.backfill(database)
        #expect(halfway.through != nil && halfway.through != afterKill.through && !halfway.done, "the second server went on: \(halfway)")
        #expect(try Self.copyCount(database) == 2 * batch, "the second server copied the next batch, not the first again")
        try database.write { sql in
            try sql.execute(
                """
                INSERT INTO public.fuel_logs (id, user_id, fleet_id, liters, note)
                SELECT gen_random_uuid(), 'u-2', 'fleet-0', 200000 + g, 'inserted during' FROM generate_series(1, 30) g
                """, [])
            try sql.execute("UPDATE public.fuel_logs SET liters = liters + 1, note = 'updated during' WHERE liters % 200 = 7", [])
            try sql.execute("UPDATE public.fuel_logs SET user_id = 'u-8' WHERE liters % 700 = 3", [])
            try sql.execute("DELETE FROM public.fuel_logs WHERE liters % 650 = 5", [])
        }
        lock.finish()

        try await eventually("the backfill is done", timeout: .seconds(60)) { try Self.backfill(database).done }
        try await eventually("the backend's writes have their versions", timeout: .seconds(30)) { try Self.queued(database) == 0 }

        let table = try Self.tableRows(database)
        let copies = try Self.copies(database)
        let live = copies.compactMapValues { $0 }
        #expect(table.count == 9_000 + 60 - 20 - 14, "the table as the test wrote it (\(table.count) rows)")
        Self.expectSame(live, as: table, "the copies differ from the table")
        #expect(live.count == table.count)
        #expect(copies.keys.allSatisfy { table[$0] != nil || copies[$0]! == nil }, "a live copy of a deleted row")
        let versions = try database.read { sql in
            try sql.first("SELECT count(DISTINCT version), count(*) FROM records WHERE collection = 'fuel_logs'")
        }
        #expect(versions.map { $0.int(0) == $0.int(1) } == true, "two copies share a version: \(String(describing: versions))")
        let pulled = try await Self.pullAll(server, token: admin)
        Self.expectSame(pulled, as: table, "a device pulling from scratch gets a different table")
        #expect(pulled.count == table.count)
    }
}

/// The sequencer's advisory lock, held by the test on a connection of its
/// own (the session-level form of the same key): a server's backfill then
/// stops between two batches exactly when the test says.
final class SequencerLock: @unchecked Sendable {
    // @unchecked Sendable: used by one test task at a time, each blocking call on a thread of its own.
    private let connection: PostgresConnection
    private let key: String
    private var held = false

    init(_ location: String) throws {
        let statement = OwnTableSequencer.lockStatement
        let open = try #require(statement.firstIndex(of: "("))
        key = String(statement[statement.index(after: open)...].dropLast())
        connection = try PostgresConnection(
            url: location, redactedURL: "the test database", timeouts: .sharedTestDatabase, failureKind: .failure)
        try connection.command("SELECT pg_advisory_lock(\(key))")
        held = true
    }

    /// The backends waiting for the lock (a server's batch about to start).
    func waiters(_ database: any ServerDatabase) throws -> [Int64] {
        let first = try #require(key.split(separator: ",").first.map { $0.trimmingCharacters(in: .whitespaces) })
        return try database.read { sql in
            try sql.query(
                """
                SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = CAST(? AS oid)
                    AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                """, [.text(first)]
            ).map { $0.int(0) }
        }
    }

    /// Lets the batch waiting for the lock run, and holds the lock again once
    /// that batch's transaction ended: a waiting backend is given the lock as
    /// it is released, so the test's request queues behind it.
    func letOneBatchThrough() async throws {
        try await runBlocking { [self] in
            try connection.command("SELECT pg_advisory_unlock(\(key))")
            try connection.command("SELECT pg_advisory_lock(\(key))")
        }
    }

    func finish() {
        guard held else { return }
        held = false
        connection.finish()
    }
}
