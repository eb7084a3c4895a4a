import Foundation
import OutpostServer

/// `outpost tables sql|detach`: what Outpost adds to an app's own
/// PostgreSQL tables, for the administrator who applies it by hand or
/// takes it away.
enum TablesCommand {
    static let help = """
        Usage: outpost tables sql --config FILE --database URL
               outpost tables detach NAME --database URL

        sql     prints the SQL Outpost installs on the tables the configuration maps
                (two triggers per table and their functions, in Outpost's own schema),
                for a database administrator who applies schema changes by hand.
                `outpost serve` then finds it in place and installs nothing.
                Outpost's own tables are created first, as `outpost serve` would.
        detach  removes what Outpost added for the collection NAME: its triggers and
                functions, and every row Outpost keeps about it (copies, history, queue).
                The app's table, its rows, columns, constraints and indexes stay as they
                were. Remove the collection from the servers' configuration too, or the
                next start attaches it again.

          --config FILE   the servers' configuration file
          --database URL  the PostgreSQL database (postgres://…)
        """

    static func run(_ words: [String]) throws {
        var words = words
        guard let verb = words.first, verb == "sql" || verb == "detach" else {
            throw UsageError("Say 'outpost tables sql' or 'outpost tables detach NAME'.")
        }
        words.removeFirst()
        if verb == "sql" {
            var arguments = try Arguments(words)
            guard let path = arguments.option("config") else { throw UsageError("Give the configuration file with --config.") }
            let location = try postgresLocation(&arguments)
            try arguments.checkAllUsed()
            let config = try loadConfig(path)
            guard !config.tableMappings.isEmpty else {
                throw CommandFailure("The configuration \(path) maps no table (no collection has a \"table\").")
            }
            let database = try ServeCommand.openDatabase(location, poolSize: 1)
            defer { database.close() }
            print(try OwnTables.script(for: config, in: database))
        } else {
            guard let name = words.first, !name.hasPrefix("--") else {
                throw UsageError("Name the collection to detach: outpost tables detach NAME --database URL.")
            }
            words.removeFirst()
            var arguments = try Arguments(words)
            let location = try postgresLocation(&arguments)
            try arguments.checkAllUsed()
            let database = try ServeCommand.openDatabase(location, poolSize: 1)
            defer { database.close() }
            guard let table = try OwnTables.detach(name, in: database) else {
                throw CommandFailure("No table is attached as the collection '\(name)' in this database.")
            }
            Terminal.note("Detached \(table) (collection '\(name)'): its triggers, functions and Outpost's rows about it are gone.")
        }
    }

    private static func postgresLocation(_ arguments: inout Arguments) throws -> String {
        guard let location = arguments.option("database"), DatabaseLocation.isPostgres(location) else {
            throw UsageError("Give the app's PostgreSQL database with --database postgres://….")
        }
        return location
    }

    private static func loadConfig(_ path: String) throws -> ServerConfig {
        do {
            return try ServerConfig.load(path: path)
        } catch let error as ConfigError {
            throw CommandFailure(error.description.prefix(1).uppercased() + error.description.dropFirst())
        }
    }
}
