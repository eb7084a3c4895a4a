import Foundation

/// What a device says of its outbox on every request (`Outpost-Outbox:
/// 12; oldest=3600`): how many changes it holds unconfirmed and how old
/// the oldest is, in seconds of its own clock. The server keeps the last
/// report of each device it heard from, so an operator can be told of a
/// device whose changes stopped leaving it, which no error on the server
/// shows (the device may be refused before any push is read, or send
/// nothing the server would count as failed).
package struct OutboxReport: Sendable, Equatable {
    package static let header = "Outpost-Outbox"

    /// Changes not confirmed by the server yet.
    package var unsent: Int
    /// Age of the oldest of them, in whole seconds; nil when there are none.
    package var oldestSeconds: Int?

    package init(unsent: Int, oldestSeconds: Int?) {
        self.unsent = max(0, unsent)
        self.oldestSeconds = self.unsent == 0 ? nil : oldestSeconds.map { max(0, $0) }
    }

    package var headerValue: String {
        guard let oldestSeconds else { return String(unsent) }
        return "\(unsent); oldest=\(oldestSeconds)"
    }

    /// Reads a header value; nil when it is not one (the request goes on: a
    /// report changes no answer).
    package init?(headerValue: String) {
        let parts = headerValue.split(separator: ";", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        guard let count = parts.first.flatMap({ Int($0) }), count >= 0, parts.count <= 2 else { return nil }
        var oldest: Int?
        if parts.count == 2 {
            let pair = parts[1].split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2, pair[0] == "oldest", let seconds = Int(pair[1]), seconds >= 0 else { return nil }
            oldest = seconds
        }
        self.init(unsent: count, oldestSeconds: oldest)
    }
}
