// The `outpost` command line. Each command lives in Commands/.
import Foundation

exit(await OutpostCommand.run(Array(CommandLine.arguments.dropFirst())))
