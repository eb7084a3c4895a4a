import Foundation
import OutpostCore
import OutpostServer

/// `outpost token issue|revoke`: access tokens, stored only as hashes.
enum TokenCommand {
    static let help = """
        Usage: outpost token issue --user USER --role field|coordinator|admin --team TEAM [--ttl SECONDS] [--database PATH|URL]
               outpost token revoke --token TOKEN [--database PATH|URL]

        issue   makes a token and prints it as the last line; only its hash is stored.
                Works on a database no server has opened yet (it is created and migrated).
        revoke  withdraws a token at once, on every server using the database.

          --database PATH|URL  the server's database (default \(DatabaseLocation.defaultSQLitePath))
          --ttl SECONDS        the token expires after this many seconds (default: never)
        """

    static func run(_ words: [String]) throws {
        var words = words
        guard let action = words.first else { throw UsageError("Say 'outpost token issue' or 'outpost token revoke'.") }
        words.removeFirst()
        var arguments = try Arguments(words)
        let location = arguments.option("database") ?? DatabaseLocation.defaultSQLitePath
        switch action {
        case "issue":
            let user = try arguments.required("user", "the user id")
            let roleText = try arguments.required("role", "the role (field, coordinator or admin)")
            guard let role = Role(rawValue: roleText) else {
                throw UsageError("The role must be field, coordinator or admin, not '\(roleText)'.")
            }
            let team = try arguments.required("team", "the team")
            let ttl = try arguments.integer("ttl", in: 1...(10 * 365 * 86_400))
            try arguments.checkAllUsed()
            let database = try ServeCommand.openDatabase(location)
            defer { database.close() }
            let server = try SyncServer(database: database, config: ServerConfig())
            let token = try server.tokens.issue(user: user, role: role, team: team, ttl: ttl.map(TimeInterval.init))
            Terminal.note("Token for \(user) (\(role.rawValue), team \(team))\(ttl.map { ", valid for \($0) s" } ?? ""):")
            print(token)
        case "revoke":
            let token = try arguments.required("token", "the token to revoke")
            try arguments.checkAllUsed()
            let database = try ServeCommand.openDatabase(location)
            defer { database.close() }
            let server = try SyncServer(database: database, config: ServerConfig())
            guard try server.tokens.revoke(token) else {
                throw CommandFailure("No active token matches; nothing was revoked.")
            }
            print("Revoked.")
        default:
            throw UsageError("'\(action)' is not a token action: use issue or revoke.")
        }
    }
}
