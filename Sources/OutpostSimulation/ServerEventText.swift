import Foundation

/// Server-sent event text as bytes: whole events, each with its blank line,
/// kept as they were sent (the simulation and the chaos proxy repeat them).
enum ServerEventText {
    /// Takes the whole events from the front of `buffer`; a partial one stays.
    static func takeEvents(from buffer: inout [UInt8]) -> [[UInt8]] {
        var events: [[UInt8]] = []
        var start = 0
        var index = 1
        while index < buffer.count {
            if buffer[index] == 0x0A && buffer[index - 1] == 0x0A {
                events.append(Array(buffer[start...index]))
                start = index + 1
                index = start + 1
            } else {
                index += 1
            }
        }
        buffer.removeFirst(start)
        return events
    }

    /// The whole events in `bytes`.
    static func split(_ bytes: Data) -> [Data] {
        var buffer = Array(bytes)
        return takeEvents(from: &buffer).map { Data($0) }
    }

    /// Whether an event is a page of changes.
    static func isChanges(_ event: some Collection<UInt8>) -> Bool {
        event.starts(with: changesPrefix)
    }

    private static let changesPrefix = Array("event: changes".utf8)
}
