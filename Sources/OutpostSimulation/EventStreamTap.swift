/// Reads the server's side of one proxied connection as HTTP/1.1 answers:
/// for a `text/event-stream` answer sent in chunks (what `outpost serve`
/// sends for `GET /v1/stream`), where each chunk ends and which events
/// its payload carries. The chaos proxy uses it to repeat old events on a
/// newer stream, at a chunk boundary, wrapped as a chunk of their own.
///
/// It follows a connection's answers until the first one that is not an
/// event stream (finding the end of other answers would need their
/// lengths); from then on it only passes bytes.
struct EventStreamTap {
    private enum Phase {
        /// Reading an answer's status line and headers.
        case head
        /// A chunk's size line.
        case size
        /// A chunk's payload, this many bytes still to come.
        case payload(Int)
        /// The line end after a chunk's payload, this many bytes still to come.
        case payloadEnd(Int)
        /// After the last chunk: the empty trailer line.
        case trailer
        /// Not an event stream: nothing more is parsed.
        case other
    }

    private var phase = Phase.head
    private var line: [UInt8] = []
    private var events: [UInt8] = []

    /// Feeds bytes from the server. Returns the offsets in `bytes` just
    /// after each chunk that ended there, and the `changes` events that
    /// were completed.
    mutating func feed(_ bytes: ArraySlice<UInt8>) -> (boundaries: [Int], changes: [[UInt8]]) {
        var boundaries: [Int] = []
        var changes: [[UInt8]] = []
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            index += 1
            switch phase {
            case .other:
                return (boundaries, changes)
            case .head:
                line.append(byte)
                if line.count >= 4, line.suffix(4).elementsEqual([13, 10, 13, 10]) {
                    let head = String(decoding: line, as: UTF8.self).lowercased()
                    line.removeAll()
                    // A compressed stream's events cannot be read (nor old ones put between them).
                    let isStream = head.contains("text/event-stream") && head.contains("transfer-encoding: chunked")
                        && !head.contains("content-encoding:")
                    phase = isStream ? .size : .other
                } else if line.count > 65_536 {
                    phase = .other
                }
            case .size:
                line.append(byte)
                guard line.count >= 2, line.suffix(2).elementsEqual([13, 10]) else {
                    if line.count > 1_024 { phase = .other }
                    continue
                }
                let text = String(decoding: line.dropLast(2), as: UTF8.self)
                line.removeAll()
                let size = Int(text.split(separator: ";").first.map(String.init) ?? "", radix: 16)
                guard let size else {
                    phase = .other
                    continue
                }
                phase = size == 0 ? .trailer : .payload(size)
            case .payload(let remaining):
                // Whole runs of payload at once, not byte by byte.
                let take = min(remaining, bytes.endIndex - index + 1)
                let run = bytes[(index - 1)..<(index - 1 + take)]
                index += take - 1
                events += run
                changes += completedChanges()
                phase = remaining - take == 0 ? .payloadEnd(2) : .payload(remaining - take)
            case .payloadEnd(let remaining):
                if remaining > 1 {
                    phase = .payloadEnd(remaining - 1)
                } else {
                    phase = .size
                    boundaries.append(index - bytes.startIndex)
                }
            case .trailer:
                line.append(byte)
                if line.suffix(2).elementsEqual([13, 10]) {
                    line.removeAll()
                    phase = .head
                }
            }
        }
        return (boundaries, changes)
    }

    /// Takes complete events out of the payload; returns the `changes` ones.
    private mutating func completedChanges() -> [[UInt8]] {
        ServerEventText.takeEvents(from: &events).filter(ServerEventText.isChanges)
    }

    /// `event` as one chunk of a chunked answer.
    static func chunk(_ event: [UInt8]) -> [UInt8] {
        Array(String(event.count, radix: 16).utf8) + [13, 10] + event + [13, 10]
    }
}
