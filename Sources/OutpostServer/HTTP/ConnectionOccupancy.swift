import Foundation

/// How full the server's connection limits are, overall and per address,
/// counted as libmicrohttpd opens and closes connections.
///
/// A connection that has been answered waits for its next request; while
/// the limits have room it waits as long as the idle timeout allows (a
/// device's next request reuses it). Once half of either limit is taken,
/// answered connections wait only `HTTPServer.keepAliveSeconds`, so that
/// sockets kept alive by earlier syncs free their slots for new ones (500
/// devices behind one address otherwise kept their streams in the listen
/// queue). Not always: a server that closes a kept-alive connection races
/// the client's next request on it, and Foundation on Linux, whose request
/// met the closing socket, sent it again on a new connection without its
/// body and waited for an answer until its timeout (a push stalled for 600
/// seconds in a benchmark of 16 devices pausing about 2 s between pushes).
final class ConnectionOccupancy: @unchecked Sendable {
    // @unchecked Sendable: `open` and `byAddress` are only touched while `lock` is held.
    private let lock = NSLock()
    private var open = 0
    private var byAddress: [UInt32: Int] = [:]
    private let total: Int
    private let perAddress: Int

    init(total: Int, perAddress: Int) {
        self.total = total
        self.perAddress = perAddress
    }

    func opened(address: UInt32) {
        lock.lock()
        open += 1
        byAddress[address, default: 0] += 1
        lock.unlock()
    }

    func closed(address: UInt32) {
        lock.lock()
        open = max(0, open - 1)
        if let count = byAddress[address] { byAddress[address] = count > 1 ? count - 1 : nil }
        lock.unlock()
    }

    /// Whether half of the overall limit, or of `address`'s share, is taken.
    func isCrowded(address: UInt32) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return open * 2 >= total || (byAddress[address] ?? 0) * 2 >= perAddress
    }

    /// Connections open now (tests).
    var openConnections: Int {
        lock.lock()
        defer { lock.unlock() }
        return open
    }
}
