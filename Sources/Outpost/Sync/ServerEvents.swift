package import Foundation

/// One server-sent event of `GET /v1/stream`.
package struct ServerEvent: Sendable, Equatable {
    /// `changes`, `heartbeat` or `error`.
    package var name: String
    /// The event's data: a JSON object.
    package var data: Data

    package init(name: String, data: Data) {
        self.name = name
        self.data = data
    }
}

/// Cuts a `text/event-stream` body into events as its bytes arrive, in
/// pieces of any size: `event:` names the event, `data:` lines make its
/// data, a blank line ends it, a line starting with `:` is a comment.
package struct ServerEventParser: Sendable {
    private var line: [UInt8] = []
    private var name = ""
    private var data: [UInt8] = []
    private var hasData = false

    package init() {}

    /// The events completed by `bytes`.
    package mutating func feed(_ bytes: Data) -> [ServerEvent] {
        var events: [ServerEvent] = []
        // Whole runs up to each line end are copied at once: byte by byte
        // through `Data`'s iterator, the parser was a visible share of every
        // engine's cost of a live change.
        bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            var start = raw.startIndex
            while start < raw.endIndex {
                guard let end = raw[start...].firstIndex(of: UInt8(ascii: "\n")) else {
                    line.append(contentsOf: raw[start...])
                    return
                }
                line.append(contentsOf: raw[start..<end])
                start = end + 1
                endLine(into: &events)
            }
        }
        return events
    }

    /// A line ended: its field is taken, or a blank line ends the event.
    private mutating func endLine(into events: inout [ServerEvent]) {
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        if line.isEmpty {
            if hasData || !name.isEmpty {
                events.append(ServerEvent(name: name.isEmpty ? "message" : name, data: Data(data)))
            }
            name = ""
            data = []
            hasData = false
        } else if line.first != UInt8(ascii: ":") {
            let colon = line.firstIndex(of: UInt8(ascii: ":")) ?? line.endIndex
            let field = String(decoding: line[..<colon], as: UTF8.self)
            var value = colon < line.endIndex ? line[(colon + 1)...] : []
            if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
            switch field {
            case "event": name = String(decoding: value, as: UTF8.self)
            case "data":
                if hasData { data.append(UInt8(ascii: "\n")) }
                data.append(contentsOf: value)
                hasData = true
            default: break
            }
        }
        line.removeAll(keepingCapacity: true)
    }
}
