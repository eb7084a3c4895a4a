import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// The built-in catalogs are seeded into an empty collection once, even by
/// servers starting together on one database: every device downloads
/// whatever is there, copies included.
@Suite("Catalog seed", .timeLimit(.minutes(2)))
struct CatalogSeedTests {
    @Test(arguments: Backend.available)
    func serversSeedingAtOnceLeaveOneCopy(_ backend: Backend) async throws {
        let directory = try TemporaryDirectory()
        let (database, location) = try backend.makeDatabase(in: directory)
        defer { database.close() }
        try ServerSchema.migrate(database)
        let config = try ServerConfig()
        // Three servers' connections, each seeding at the same moment.
        var databases: [any ServerDatabase] = [database]
        if backend == .postgres {
            for _ in 0..<2 {
                databases.append(try PostgresDatabase(url: location, poolSize: 1, timeouts: .sharedTestDatabase))
            }
        } else {
            databases += [database, database]
        }
        defer { for extra in databases.dropFirst() where backend == .postgres { extra.close() } }
        let start = DispatchSemaphore(value: 0)
        let failures = Locked<[String]>([])
        let group = DispatchGroup()
        for each in databases {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                start.wait()
                do {
                    try CatalogSeed.seedIfEmpty(each, config: config, clock: SystemWallClock())
                } catch {
                    failures.withLock { $0.append(String(describing: error)) }
                }
            }
        }
        for _ in databases { start.signal() }
        try await runBlocking {
            guard group.wait(timeout: .now() + 60) == .success else { throw WaitTimedOut("the three seeds finished", timeout: .seconds(60)) }
        }
        #expect(failures.current.isEmpty)
        let rows = try database.read { sql in
            try sql.first("SELECT COUNT(*) FROM records WHERE collection = 'catalogs'")?.int(0)
        }
        #expect(rows == Int64(CatalogSeed.entries.count), "one copy of each catalog entry")
    }

    /// A deployment seeded three times before the lock: the next start
    /// turns the copies into tombstones (devices drop them), keeps one of
    /// each entry, and leaves an administrator's own entries alone.
    @Test(arguments: Backend.available)
    func copiesLeftByAnEarlierRaceBecomeTombstones(_ backend: Backend) async throws {
        let directory = try TemporaryDirectory()
        let (database, _) = try backend.makeDatabase(in: directory)
        defer { database.close() }
        try ServerSchema.migrate(database)
        let config = try ServerConfig()
        try CatalogSeed.seedIfEmpty(database, config: config, clock: SystemWallClock())
        // Two more copies of the seed, as the unlocked race left them, and an entry of the administrator's.
        try database.write { sql in
            var versions = try FeedVersions.begin(sql)
            for round in 0..<2 {
                for (index, entry) in CatalogSeed.entries.enumerated() {
                    let data = #"{"catalog":"\#(entry.catalog)","code":"\#(entry.code)","name":"\#(entry.name)"}"#
                    try sql.execute(
                        """
                        INSERT INTO records (collection, uuid, version, updated_at, deleted, owner, team, created_by_user,
                            created_by_client, window_at, data)
                        VALUES ('catalogs', ?, ?, '2026-01-01T00:00:00.000000Z', 0, 'system', 'system', 'system', 'seed', NULL, ?)
                        """,
                        [.text(String(format: "0190e3c4-0000-7000-8000-%012d", round * 100 + index)), .integer(try versions.next()), .text(data)])
                }
            }
            try sql.execute(
                """
                INSERT INTO records (collection, uuid, version, updated_at, deleted, owner, team, created_by_user,
                    created_by_client, window_at, data)
                VALUES ('catalogs', '0190e3c4-0000-7000-8000-999999999999', ?, '2026-01-01T00:00:00.000000Z', 0, 'system',
                    'system', 'admin', 'console', NULL, '{"catalog":"region","code":"north","name":"North (by hand)"}')
                """, [.integer(try versions.next())])
            if let written = versions.issued { try SearchIndex.addRecords(at: written, in: sql) }
            try versions.finish(sql)
        }
        let before = try database.read { try $0.first("SELECT MAX(version) FROM records")?.int(0) ?? 0 }
        try CatalogSeed.seedIfEmpty(database, config: config, clock: SystemWallClock())
        let (live, tombstones, newer) = try database.read { sql in
            (
                try sql.first("SELECT COUNT(*) FROM records WHERE collection = 'catalogs' AND deleted = 0")?.int(0),
                try sql.first("SELECT COUNT(*) FROM records WHERE collection = 'catalogs' AND deleted = 1")?.int(0),
                try sql.first("SELECT COUNT(*) FROM records WHERE deleted = 1 AND version > ?", [.integer(before)])?.int(0)
            )
        }
        #expect(live == Int64(CatalogSeed.entries.count) + 1, "one of each seeded entry, and the administrator's")
        #expect(tombstones == Int64(CatalogSeed.entries.count) * 2)
        #expect(newer == tombstones, "every tombstone has a new feed version, so devices pull it")
        // Once repaired, a later start changes nothing.
        let repaired = try database.read { try $0.first("SELECT MAX(version) FROM records")?.int(0) }
        try CatalogSeed.seedIfEmpty(database, config: config, clock: SystemWallClock())
        #expect(try database.read { try $0.first("SELECT MAX(version) FROM records")?.int(0) } == repaired)
    }
}
