import Foundation
import OutpostCore
import OutpostServer

/// The simulation with `people` as a table of the app's own PostgreSQL
/// database, and the company's backend writing to it as one more actor:
/// it edits people's notes and phones, adds people for the devices' users
/// and deletes some, through a connection of its own, as the app's API
/// would. Its writes are sequenced at moments the seed chooses (the
/// server's sequencer thread is off), so a seed replays the same way.
final class SimulatedBackend {
    let location: String
    private let scratch: String
    private let schema: String
    private let database: PostgresDatabase
    private var random: SeededRandom
    private var added = 0

    /// A schema of its own for this run (Outpost's tables and the app's
    /// table in it), in one database per process and cluster: a database
    /// per run copied its template into the write-ahead log every time, and
    /// a replica of the same cluster fell behind replaying it.
    init(clusterURL: String, seed: UInt64) throws {
        let scratch = try Self.scratchDatabase(clusterURL)
        let schema = "sim_\(seed)_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(10)
        self.scratch = scratch
        self.schema = schema
        let admin = try PostgresDatabase(url: scratch, poolSize: 1)
        defer { admin.close() }
        _ = try admin.write { try $0.execute("CREATE SCHEMA \(schema)", []) }
        guard var components = URLComponents(string: scratch) else { throw URLError(.badURL) }
        components.queryItems = (components.queryItems ?? []) + [URLQueryItem(name: "options", value: "-csearch_path=\(schema)")]
        location = components.string ?? scratch
        database = try PostgresDatabase(url: location, poolSize: 1)
        try database.write { sql in
            _ = try sql.execute(
                """
                CREATE TABLE app_people (id uuid PRIMARY KEY, owner_id text NOT NULL, team_id text NOT NULL,
                    name text NOT NULL, phone text, address text, notes text, section integer, created_at timestamptz)
                """, [])
        }
        random = SeededRandom(seed: seed ^ 0x4241_434B_454E_4421)
    }

    /// `people` on the app's table; the other collections as before.
    func serverConfig(mergeFields: Bool) throws -> ServerConfig {
        try ServerConfig(
            collections: [DefaultCollections.visits, DefaultCollections.catalogs],
            tables: [
                TableMapping(
                    name: "people", table: "\(schema).app_people", key: "id", ownerColumn: "owner_id", teamColumn: "team_id",
                    windowField: "created_at", policy: mergeFields ? .mergeFields : .serverWins,
                    declaredFields: ["name": FieldSchema(.text, required: true)])
            ])
    }

    /// Now and then, one write of the backend; the queue is sequenced now or
    /// left for later (a push of the same row, or a later round, settles it).
    /// Returns whether the backend wrote.
    @discardableResult
    func step(server: SyncServer, owners: [(user: String, team: String)], trace: (String) -> Void) throws -> Bool {
        guard random.next() % 100 < 15 else { return false }
        let kind = random.next() % 10
        try Self.retryingTransient { try database.write { sql in
            let people = try sql.query("SELECT CAST(id AS text) FROM app_people ORDER BY id", []).map { $0.string(0) }
            switch kind {
            case 0..<5 where !people.isEmpty:
                let target = people[Int(random.next() % UInt64(people.count))]
                let field = random.next() % 2 == 0 ? "notes" : "phone"
                let value = "backend \(random.next() % 1000)"
                try sql.execute("UPDATE app_people SET \(field) = ? WHERE id = CAST(? AS uuid)", [.text(value), .text(target)])
                trace("backend: \(field) of \(target) = \(value)")
            case 0..<8:  // (an edit with nobody to edit adds a person instead)
                let owner = owners[Int(random.next() % UInt64(owners.count))]
                added += 1
                let uuid = Self.uuid(&random).wireText
                try sql.execute(
                    "INSERT INTO app_people (id, owner_id, team_id, name, section) VALUES (CAST(? AS uuid), ?, ?, ?, ?)",
                    [.text(uuid), .text(owner.user), .text(owner.team), .text("Imported \(added)"), .integer(Int64(random.next() % 9))])
                trace("backend: add person \(uuid) for \(owner.user)")
            default:
                guard !people.isEmpty else { return }
                let target = people[Int(random.next() % UInt64(people.count))]
                try sql.execute("DELETE FROM app_people WHERE id = CAST(? AS uuid)", [.text(target)])
                trace("backend: delete person \(target)")
            }
        } }
        if random.next() % 2 == 0 {
            let count = try Self.retryingTransient { try server.ownTables?.drain() ?? 0 }
            trace("backend: \(count) queued row(s) sequenced")
        }
        return true
    }

    /// Runs `body` again when PostgreSQL said "not now" (a connection lost
    /// under a loaded test run, a serialization failure): as a backend's own
    /// job would. The pool replaces a lost connection; nothing of a failed
    /// transaction was kept.
    static func retryingTransient<T>(_ body: () throws -> T) throws -> T {
        var attempt = 1
        while true {
            do {
                return try body()
            } catch let error as DatabaseError where error.kind == .transient && attempt < 5 {
                attempt += 1
                Thread.sleep(forTimeInterval: 0.05 * Double(attempt))
            }
        }
    }

    /// A random (version 4) uuid from the seed, as a backend's database would make.
    static func uuid(_ random: inout SeededRandom) -> UUID {
        var bytes = withUnsafeBytes(of: random.next().bigEndian) { Array($0) } + withUnsafeBytes(of: random.next().bigEndian) { Array($0) }
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9], bytes[10],
                bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }

    /// Sequences everything queued (again while PostgreSQL says "not now").
    func drain(_ server: SyncServer) throws -> Int? {
        try Self.retryingTransient { try server.ownTables?.drain() }
    }

    /// Where the copies disagree with the table, after the queue is drained.
    func mismatches(server: SyncServer) throws -> [Violation] {
        try Self.retryingTransient { _ = try server.ownTables?.drain() }
        var violations: [Violation] = []
        for table in server.config.mappedTables.values {
            for mismatch in try OwnTables.copyMismatches(table, in: server.database) {
                violations.append(Violation(invariant: "I5", detail: "the server's copy differs from the app's table: \(mismatch)"))
            }
        }
        return violations
    }

    /// Drops the run's schema.
    func close() {
        database.close()
        guard let admin = try? PostgresDatabase(url: scratch, poolSize: 1) else { return }
        defer { admin.close() }
        _ = try? admin.write { try $0.execute("DROP SCHEMA IF EXISTS \(schema) CASCADE", []) }
    }

    /// The scratch database of this process on `clusterURL`, made at first use.
    private static let scratchDatabases = Locked<[String: String]>([:])

    private static func scratchDatabase(_ clusterURL: String) throws -> String {
        try scratchDatabases.withLock { known in
            if let url = known[clusterURL] { return url }
            let name = "outpost_sim_\(getpid())_" + UUID().uuidString.lowercased().prefix(8)
            try PostgresDatabase.clusterCommand("CREATE DATABASE \(name)", at: clusterURL)
            guard var components = URLComponents(string: clusterURL) else { throw URLError(.badURL) }
            components.path = "/\(name)"
            let url = components.string ?? clusterURL
            known[clusterURL] = url
            return url
        }
    }

    /// Drops the scratch databases this process made (after its last run).
    static func dropScratchDatabases() {
        let made = scratchDatabases.withLock { known -> [(String, String)] in
            defer { known.removeAll() }
            return known.map { ($0.key, $0.value) }
        }
        for (cluster, url) in made {
            guard let name = URLComponents(string: url)?.path.dropFirst() else { continue }
            try? PostgresDatabase.clusterCommand("DROP DATABASE IF EXISTS \(name) WITH (FORCE)", at: cluster)
        }
    }
}

extension Simulation {
    /// Drops the PostgreSQL databases this process's `--own-tables` runs
    /// made (one per cluster; each run's schema is dropped as it ends).
    package static func dropOwnTableDatabases() { SimulatedBackend.dropScratchDatabases() }
}
