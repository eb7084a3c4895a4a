import Foundation
import OutpostServer

/// `outpost migrate`: the server database's schema steps, for a rolling
/// upgrade. Expand steps (what `outpost serve` takes when it starts) leave
/// the previous release serving; contract steps wait for `--contract`,
/// run once no server of the previous release is left.
enum MigrateCommand {
    static let help = """
        Usage: outpost migrate [--database PATH|URL] [--contract] [--status]

        Brings the server's database to this release's schema. Without --contract it takes
        the expand steps only, as 'outpost serve' does when it starts: servers of the
        previous release keep serving beside this one. --contract then takes the steps
        that previous release cannot run with; run it once every server runs this release
        (docs/operations.md, "Upgrading"). Prints where the database stands.

          --database PATH|URL  the server's database (default \(DatabaseLocation.defaultSQLitePath))
          --contract           also take the contract steps (older servers then answer 503 on /v1/ready)
          --status             only print where the database stands; change nothing
        """

    static func run(_ words: [String]) throws {
        var arguments = try Arguments(words, flagNames: ["contract", "status"])
        let location = arguments.option("database") ?? DatabaseLocation.defaultSQLitePath
        let contract = arguments.flag("contract")
        let statusOnly = arguments.flag("status")
        try arguments.checkAllUsed()
        if contract && statusOnly { throw UsageError("Give --contract or --status, not both.") }
        let database = try ServeCommand.openDatabase(location)
        defer { database.close() }
        let known = ServerSchema.current(database.dialect)
        if !statusOnly {
            do {
                try ServerSchema.migrate(database, contract: contract)
            } catch {
                throw CommandFailure("The migration stopped and changed nothing: \(error)")
            }
        }
        let state: SchemaState
        do {
            state = try SchemaState.read(database)
        } catch {
            throw CommandFailure("The database has no Outpost schema yet (run without --status to make it): \(error)")
        }
        print("schema: step \(state.applied) of the \(known) this release knows")
        print("oldest server schema that may serve: \(state.oldestServer)")
        let pending = state.pendingContract(database.dialect)
        if pending.isEmpty {
            print("contract steps waiting: none")
        } else {
            print("contract steps waiting: \(pending.map(String.init).joined(separator: ", ")) (outpost migrate --contract, once no older server runs)")
        }
        if let refusal = state.refusal(known: known, required: ServerSchema.required(database.dialect)) { Terminal.note(refusal) }
    }
}
