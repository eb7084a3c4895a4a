import Foundation
package import OutpostSQLite

/// One step of the device database's schema, named for what it does.
package struct StoreMigration: Sendable {
    package let name: String
    let apply: @Sendable (SQLiteConnection) throws -> Void
}

/// The device database's fixed tables, made and changed by named steps run
/// in order. Each step's name is written into `store_migrations` in the same
/// transaction as its effect, so a store says itself which steps it has.
///
/// Collection tables are not here: which collections exist is the app's
/// choice at each opening, so `RecordTable.ensure` makes and upgrades them.
package enum StoreMigrations {
    /// Every step, in the order it runs. A new step goes at the end; a
    /// step that shipped is never edited or renamed.
    package static let all: [StoreMigration] = [
        StoreMigration(name: "1-base-tables") { connection in
            try KeyValueTable.create(in: connection)
            try CatalogTable.create(in: connection)
            try OutboxTable.create(in: connection)
            try ConflictLog.create(in: connection)
            try ResyncSeenTable.create(in: connection)
        },
        StoreMigration(name: "2-doubtful-creates") { try DoubtfulCreateTable.create(in: $0) },
        StoreMigration(name: "3-blobs") { try BlobTable.create(in: $0) },
        StoreMigration(name: "4-membership-checks-without-in") { connection in
            try OutboxTable.rebuildLegacyChecks(in: connection)
            try BlobTable.rebuildLegacyChecks(in: connection)
        },
        StoreMigration(name: "5-outbox-summary-indexes") { try OutboxTable.createSummaryIndexes(in: $0) },
        StoreMigration(name: "6-outbox-failing-index") { try OutboxTable.createFailingIndex(in: $0) },
        StoreMigration(name: "7-conflict-fields") { try ConflictLog.addFields(in: $0) },
    ]

    package static var names: [String] { all.map(\.name) }

    /// Where a store records the steps it ran.
    package static let table = "store_migrations"

    /// Names of the tables the store makes itself; a collection may not take them.
    package static let fixedTables: Set<String> = [
        "kv", "catalogs", "outbox", "conflicts", "resync_seen", "doubtful_creates", "blobs", table,
    ]

    /// Releases before named steps counted them in `PRAGMA user_version`
    /// (how many of their five positional migrations ran). The steps each
    /// count stands for; the membership checks were rebuilt at every
    /// opening from the release that made count 3 the latest, so every
    /// store at 4 or 5 has them, and one at 3 may or may not (the step
    /// looks before it rebuilds).
    package static func appliedByLegacyVersion(_ version: Int) -> [String] {
        let names = self.names
        switch version {
        case ..<1: return []
        case 1: return Array(names[..<1])
        case 2: return Array(names[..<2])
        case 3: return Array(names[..<3])
        case 4: return Array(names[..<5])
        // The last numbered release had six steps; later ones are named only.
        default: return Array(names[..<6])
        }
    }

    /// The `user_version` every store is left at: what releases before
    /// named steps expect of a store they need not change, so opening it
    /// with one of them again does not try to make its tables a second time.
    package static let legacyVersion = 5

    package static func isRecorded(_ connection: SQLiteConnection) throws -> Bool {
        try connection.first("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?", [.text(table)]) { _ in true }
            ?? false
    }

    /// The steps this store has had: those it recorded, and those its
    /// `user_version` stands for (all of a store made before steps were
    /// named; still all of them if a release before named steps emptied
    /// the record in a wipe).
    package static func applied(_ connection: SQLiteConnection) throws -> Set<String> {
        let version = try connection.first("PRAGMA user_version") { Int($0.int64(0)) } ?? 0
        var applied = Set(appliedByLegacyVersion(version))
        if try isRecorded(connection) {
            applied.formUnion(try connection.query("SELECT name FROM \(table)") { $0.string(0) })
        }
        return applied
    }

    /// The steps still to run, in order.
    package static func pending(_ connection: SQLiteConnection) throws -> [StoreMigration] {
        let applied = try applied(connection)
        return all.filter { !applied.contains($0.name) }
    }

    /// Runs every pending step and records it. Inside the caller's
    /// transaction: a step that fails leaves the store as it was.
    package static func migrate(_ connection: SQLiteConnection) throws {
        let applied = try applied(connection)
        if try !isRecorded(connection) {
            try connection.execute("CREATE TABLE \(table) (name TEXT PRIMARY KEY) WITHOUT ROWID")
        }
        // The steps a numbered store had are written down once, as if run here.
        for name in names where applied.contains(name) {
            try connection.run("INSERT OR IGNORE INTO \(table) (name) VALUES (?)", [.text(name)])
        }
        for migration in all where !applied.contains(migration.name) {
            try migration.apply(connection)
            try connection.run("INSERT INTO \(table) (name) VALUES (?)", [.text(migration.name)])
        }
        try connection.execute("PRAGMA user_version = \(legacyVersion)")
    }
}
