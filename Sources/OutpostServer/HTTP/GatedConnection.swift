import Foundation

/// One socket as the connection gate sees it, from libmicrohttpd's
/// notice that it opened to the notice that it closed.
///
/// `@unchecked Sendable`: every `var` is read and written only while the
/// gate's lock is held; `address` and `socket` never change.
final class GatedConnection: @unchecked Sendable {
    /// The peer's IPv4 address (0 when unknown).
    let address: UInt32
    /// The socket's descriptor, valid until the gate hears the connection
    /// closed (libmicrohttpd closes it only after telling the gate).
    let socket: Int32
    /// A request on it authenticated: it no longer counts against its
    /// address and is never cut.
    var proven = false
    /// Cut by the gate (its socket shut down), or refused (closed after its
    /// 503): libmicrohttpd closes it soon after, and it no longer counts anywhere.
    var retired = false
    /// Closed by libmicrohttpd.
    var closed = false
    /// Its place in the queues of connections waiting for a request's
    /// headers; 0 while a request is under way, or once proven.
    var ticket: UInt64 = 0
    /// Opened while its address's share was taken by requests under way,
    /// or while the server held its total: its request is refused unless
    /// room appeared before its headers arrived.
    var overShare = false
    var overTotal = false

    init(address: UInt32, socket: Int32) {
        self.address = address
        self.socket = socket
    }
}

/// Connections waiting for a request's headers, oldest first. Leaving the
/// queue early (headers arrived, proven, closed) only changes the
/// connection's ticket: its entry here is skipped when it comes up.
struct HeaderQueue {
    struct Entry {
        let ticket: UInt64
        /// When it began to wait (monotonic nanoseconds).
        let since: UInt64
        let connection: GatedConnection
        var isCurrent: Bool { connection.ticket == ticket && !connection.retired && !connection.closed }
    }

    private var entries: [Entry] = []
    private var head = 0

    var isEmpty: Bool { head == entries.count }

    mutating func append(_ entry: Entry) { entries.append(entry) }

    /// The oldest connection still waiting, its stale entries before it dropped.
    mutating func oldest() -> Entry? {
        while head < entries.count {
            if entries[head].isCurrent { return entries[head] }
            head += 1
        }
        compact()
        return nil
    }

    /// Removes the oldest entry (after `oldest()` returned it).
    mutating func dropOldest() {
        if head < entries.count { head += 1 }
        compact()
    }

    /// Drops stale entries at the front, so a queue nobody cuts from stays small.
    mutating func trim() {
        while head < entries.count, !entries[head].isCurrent { head += 1 }
        compact()
    }

    private mutating func compact() {
        if head == entries.count {
            entries.removeAll(keepingCapacity: entries.count <= 1024)
            head = 0
        } else if head >= 1024 && head * 2 >= entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }
}
