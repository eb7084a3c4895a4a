import Foundation
import OutpostCore
import OutpostServer

/// `outpost seed`: fills a server database with generated people, the
/// field platform's size by default, to try the console's search or a
/// device's first download at a real scale.
enum SeedCommand {
    static let help = """
        Usage: outpost seed [--people N] [--owner USER] [--team TEAM] [--database PATH|URL]

        Adds N generated people (default 235,613) of about 300 bytes each, owned by USER
        (default census) in TEAM (default north), in batches of 500. Names repeat six
        family names (Lucía Romero 17, Marco Bianchi 18, …) so a search finds many.
        Works on a database no server has opened yet (it is created and migrated).

          --database PATH|URL  the server's database (default \(DatabaseLocation.defaultSQLitePath))
        """

    static func run(_ words: [String]) throws {
        var arguments = try Arguments(words)
        let count = try arguments.integer("people", in: 1...5_000_000) ?? 235_613
        let owner = arguments.option("owner") ?? "census"
        let team = arguments.option("team") ?? "north"
        let location = arguments.option("database") ?? DatabaseLocation.defaultSQLitePath
        try arguments.checkAllUsed()
        let database = try ServeCommand.openDatabase(location)
        defer { database.close() }
        // Opening migrates: the search index's triggers exist before the first row.
        _ = try SyncServer(database: database, config: ServerConfig())
        let started = Date()
        try Bench.seedServer(database, count: count, user: owner, team: team, client: "seed", idSeed: UInt64.random(in: 1...UInt64.max))
        Terminal.note("Added \(count) people owned by \(owner) (team \(team)) in \(String(format: "%.1f", Date().timeIntervalSince(started))) s.")
    }
}
