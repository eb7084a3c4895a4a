import Foundation
import OutpostServer

/// `outpost feed restart`: run once after restoring a backup of the server's database.
enum FeedCommand {
    static let help = """
        Usage: outpost feed restart [--database PATH|URL]

        Run once after restoring a backup of the server's database, before the servers
        take traffic again. Devices that synced after the backup was taken hold positions
        in the change feed that the restored database never reached, and would miss what
        is written next. This moves the feed past every position ever handed out: each
        device's next sync downloads its data again, keeping every change it has not sent.
        It says what it did; run again with nothing written in between, it says the first
        run had already done it.

          --database PATH|URL  the server's database (default \(DatabaseLocation.defaultSQLitePath))
        """

    static func run(_ words: [String]) throws {
        var words = words
        guard words.first == "restart" else { throw UsageError("Say 'outpost feed restart'.") }
        words.removeFirst()
        var arguments = try Arguments(words)
        let location = arguments.option("database") ?? DatabaseLocation.defaultSQLitePath
        try arguments.checkAllUsed()
        guard DatabaseLocation.isPostgres(location) || FileManager.default.fileExists(atPath: location) else {
            throw UsageError("There is no server database at \(location).")
        }
        let database = try ServeCommand.openDatabase(location)
        defer { database.close() }
        _ = try SyncServer(database: database, config: ServerConfig())
        let restart = try FeedVersions.restart(database)
        print(report(restart))
    }

    /// What the restart did, in the operator's words; a second run in a row
    /// says the first had already done it, so no one wonders which counted.
    static func report(_ restart: FeedVersions.Restart) -> String {
        if let previous = restart.unusedPrevious {
            return """
                The change feed had already been restarted (at \(previous)) and nothing has been written since: \
                that run had done what was needed. It now starts at \(restart.start); a device that downloaded \
                its data again in between does so once more, keeping its unsent changes.
                """
        }
        return """
            Restarted the change feed: the newest stored change was at \(restart.highestStored), the feed now starts \
            at \(restart.start). Every device downloads its data again at its next sync, keeping its unsent changes.
            """
    }
}
