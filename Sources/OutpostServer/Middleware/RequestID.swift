import Foundation
import OutpostCore

/// The id that ties a request's answer to its log line: the caller's
/// `X-Request-Id` (a proxy's or an app's) when it is usable, so one id can be
/// followed across systems.
enum RequestID {
    /// `given` when it is 1-128 characters of letters, digits and `-_.:/+=`;
    /// nil otherwise (an id made here is used instead, never the raw header).
    static func given(_ given: String?) -> String? {
        guard let given, (1...128).contains(given.utf8.count),
            given.utf8.allSatisfy({ byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || "-_.:/+=".utf8.contains(byte)
            })
        else { return nil }
        return given
    }

    /// An error body with `"request_id"` in its `error` object, so whoever
    /// reports the error can quote it. Other bodies are returned unchanged.
    static func stamped(_ body: [UInt8], _ id: String) -> [UInt8] {
        let prefix = Array(#"{"error":{"#.utf8)
        guard body.starts(with: prefix) else { return body }
        var stamped = prefix
        stamped.append(contentsOf: #""request_id":"#.utf8)
        JSONWriter.writeString(id, to: &stamped)
        stamped.append(UInt8(ascii: ","))
        stamped.append(contentsOf: body.dropFirst(prefix.count))
        return stamped
    }
}

/// Request ids: a per-process prefix and a counter.
final class Counter: Sendable {
    private let value = Locked<UInt64>(0)
    private let prefix = String(UInt32.random(in: 0...UInt32.max), radix: 16)

    func next() -> String {
        let current = value.withLock { value -> UInt64 in
            value += 1
            return value
        }
        return "\(prefix)-\(current)"
    }
}
