import Foundation
import Outpost
import OutpostCore

/// Dispatches `outpost <command>` and turns errors into one plain sentence.
enum OutpostCommand {
    static let commands: [(name: String, summary: String)] = [
        ("demo", "Play a day in the field through a flaky network, then check the invariants."),
        ("serve", "Run the sync server (SQLite by default, or PostgreSQL)."),
        ("token", "Issue or revoke an access token."),
        ("seed", "Fill a server database with generated people (235,613 by default)."),
        ("migrate", "Bring the server database's schema up to date; --contract after a rolling upgrade."),
        ("feed", "After restoring a backup: make every device download its data again."),
        ("tables", "The SQL Outpost adds to the app's own PostgreSQL tables, or take it away."),
        ("simulate", "Run the fault-injecting multi-device simulation and check invariants."),
        ("bench", "Measure sync speed against baselines taken in the same run."),
        ("login", "Sign in to a server with a token (per --profile)."),
        ("add", "Capture a record, online or not: outpost add people name=Ana (photo=@door.jpg attaches a file)."),
        ("edit", "Change fields of a record."),
        ("delete", "Delete a record."),
        ("list", "List records with their sync state, age and attachments."),
        ("get-blob", "Write an attachment's bytes to standard output (downloading them if needed)."),
        ("sync", "Send unsent changes and download what changed."),
        ("status", "Connection, unsent changes, how current the data is."),
        ("conflicts", "Edits that lost to a newer server copy."),
        ("watch", "Keep a live channel and print each change as it arrives."),
        ("logout", "Wipe this profile's data (refuses with unsent changes)."),
        ("version", "Print the release (also --version)."),
        ("help", "Show this help, or a command's help."),
    ]

    static func run(_ words: [String]) async -> Int32 {
        var words = words
        let name = words.isEmpty ? "help" : words.removeFirst()
        do {
            if words.contains("--help") || words.contains("-h") {
                print(try help(for: name))
                return 0
            }
            switch name {
            case "version", "--version":
                print("outpost \(OutpostVersion.current)")
            case "help", "--help", "-h":
                print(try words.first.map(help(for:)) ?? overview)
            case "serve":
                try await ServeCommand.run(words)
            case "demo":
                try await DemoCommand.run(words)
            case "token":
                try TokenCommand.run(words)
            case "seed":
                try SeedCommand.run(words)
            case "feed":
                try FeedCommand.run(words)
            case "migrate":
                try MigrateCommand.run(words)
            case "tables":
                try TablesCommand.run(words)
            case "simulate":
                try await SimulateCommand.run(words)
            case "bench": try await BenchCommand.run(words)
            case "_bench-client": try await InitialSyncBench.client(words)
            case "login": try await AccountCommands.login(words)
            case "logout": try await AccountCommands.logout(words)
            case "add": try await CaptureCommands.add(words)
            case "edit": try await CaptureCommands.edit(words)
            case "delete": try await CaptureCommands.delete(words)
            case "list": try await CaptureCommands.list(words)
            case "get-blob": try await CaptureCommands.getBlob(words)
            case "sync": try await SyncCommands.sync(words)
            case "status": try await SyncCommands.status(words)
            case "conflicts": try await SyncCommands.conflicts(words)
            case "watch": try await WatchCommand.run(words)
            default:
                throw UsageError("'\(name)' is not an outpost command. Run 'outpost help' to see them.")
            }
            return 0
        } catch let error as UsageError {
            Terminal.error(error.description)
            return 2
        } catch let error as CommandFailure {
            Terminal.error(error.description)
            return 1
        } catch let error as StoreError {
            if case .databaseLost = error {
                Terminal.error(error.description + " To start over: 'outpost logout --force', then 'outpost login'.")
            } else {
                Terminal.error(error.description)
            }
            return 1
        } catch {
            Terminal.error("\(error)")
            return 1
        }
    }

    static var overview: String {
        var text = "outpost: an offline-first sync engine and its server.\n\nUsage: outpost <command> [options]\n\nCommands:\n"
        let width = (commands.map(\.name.count).max() ?? 8) + 2
        for command in commands { text += "  \(command.name.padding(toLength: width, withPad: " ", startingAt: 0))\(command.summary)\n" }
        text += "\nRun 'outpost <command> --help' for a command's options."
        return text
    }

    static func help(for name: String) throws -> String {
        switch name {
        case "serve": return ServeCommand.help
        case "demo": return DemoCommand.help
        case "token": return TokenCommand.help
        case "seed": return SeedCommand.help
        case "feed": return FeedCommand.help
        case "migrate": return MigrateCommand.help
        case "tables": return TablesCommand.help
        case "simulate": return SimulateCommand.help
        case "bench": return BenchCommand.help
        case "login", "logout": return AccountCommands.help
        case "add", "edit", "delete", "list", "get-blob": return CaptureCommands.help
        case "sync", "status", "conflicts": return SyncCommands.help
        case "watch": return WatchCommand.help
        case "help": return overview
        case "version", "--version": return "Usage: outpost version (or outpost --version)\n\nPrints the release, e.g. \"outpost \(OutpostVersion.current)\"."
        default: throw UsageError("'\(name)' is not an outpost command. Run 'outpost help' to see them.")
        }
    }
}

/// Writing to the terminal: errors on stderr, colour only on a terminal.
enum Terminal {
    static let colour = isatty(STDERR_FILENO) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil

    static func error(_ sentence: String) {
        let text = colour ? "\u{1B}[31merror:\u{1B}[0m \(sentence)\n" : "error: \(sentence)\n"
        FileHandle.standardError.write(Data(text.utf8))
    }

    static func note(_ sentence: String) {
        FileHandle.standardError.write(Data((sentence + "\n").utf8))
    }
}
