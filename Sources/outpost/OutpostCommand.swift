import Foundation

/// Dispatches `outpost <command>` and turns errors into one plain sentence.
enum OutpostCommand {
    static let commands: [(name: String, summary: String)] = [
        ("demo", "Play a day in the field through a flaky network, then check the invariants."),
        ("serve", "Run the sync server (SQLite by default, or PostgreSQL)."),
        ("token", "Issue or revoke an access token."),
        ("simulate", "Run the fault-injecting multi-device simulation and check invariants."),
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
            case "help", "--help", "-h":
                print(try words.first.map(help(for:)) ?? overview)
            case "serve":
                try await ServeCommand.run(words)
            case "demo":
                try await DemoCommand.run(words)
            case "token":
                try TokenCommand.run(words)
            case "simulate":
                try await SimulateCommand.run(words)
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
        } catch {
            Terminal.error("\(error)")
            return 1
        }
    }

    static var overview: String {
        var text = "outpost: an offline-first sync engine and its server.\n\nUsage: outpost <command> [options]\n\nCommands:\n"
        for command in commands { text += "  \(command.name.padding(toLength: 8, withPad: " ", startingAt: 0))\(command.summary)\n" }
        text += "\nRun 'outpost <command> --help' for a command's options."
        return text
    }

    static func help(for name: String) throws -> String {
        switch name {
        case "serve": return ServeCommand.help
        case "demo": return DemoCommand.help
        case "token": return TokenCommand.help
        case "simulate": return SimulateCommand.help
        case "help": return overview
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
