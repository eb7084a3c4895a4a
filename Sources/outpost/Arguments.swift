import Foundation

/// A user mistake on the command line: one plain sentence, exit code 2.
struct UsageError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A command that could not do its work (server down, bad database): exit code 1.
struct CommandFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// `--name value` options, `--flag` switches and positional words.
struct Arguments {
    private(set) var positional: [String] = []
    private var options: [String: String] = [:]
    private var flags: Set<String> = []
    private var used: Set<String> = []

    /// `flagNames` are the switches that take no value.
    init(_ words: [String], flagNames: Set<String> = []) throws {
        var index = 0
        while index < words.count {
            let word = words[index]
            if word.hasPrefix("--") && word.count > 2 {
                var name = String(word.dropFirst(2))
                if let equals = name.firstIndex(of: "=") {
                    options[String(name[..<equals])] = String(name[name.index(after: equals)...])
                    name = String(name[..<equals])
                } else if flagNames.contains(name) {
                    flags.insert(name)
                } else {
                    guard index + 1 < words.count else { throw UsageError("The option --\(name) needs a value.") }
                    options[name] = words[index + 1]
                    index += 1
                }
            } else {
                positional.append(word)
            }
            index += 1
        }
    }

    mutating func option(_ name: String) -> String? {
        used.insert(name)
        return options[name]
    }

    mutating func required(_ name: String, _ what: String) throws -> String {
        guard let value = option(name), !value.isEmpty else { throw UsageError("Give \(what) with --\(name).") }
        return value
    }

    mutating func flag(_ name: String) -> Bool {
        used.insert(name)
        return flags.contains(name)
    }

    mutating func integer(_ name: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let text = option(name) else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw UsageError("--\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound).")
        }
        return value
    }

    /// Refuses options the command does not know, so a typo is not silently ignored.
    func checkAllUsed() throws {
        let unknown = Set(options.keys).union(flags).subtracting(used)
        if let name = unknown.sorted().first { throw UsageError("Unknown option --\(name).") }
    }
}
