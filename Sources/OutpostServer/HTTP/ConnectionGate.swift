import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Who may hold the server's sockets, told by libmicrohttpd's callbacks as
/// connections open, send their requests' headers, prove themselves and close.
///
/// A phone behind an office's Wi-Fi or a carrier's NAT shares its address
/// with hundreds of others, so a cap per address on every socket refused
/// the 257th phone's stream. Only connections that have not yet sent a
/// request with a valid token ("unproven") count against their address:
/// that is what a slow-header flood or a pile of idle sockets is made of.
/// Once a request on a connection authenticates it is proven, and what
/// bounds it is its user's live cap (`LiveHub`) and the server's total.
///
/// libmicrohttpd 0.9.75 has no deadline for a request's headers (its
/// timeout is an idle timeout, restarted by every byte), so the gate keeps
/// one: an unproven connection waiting longer than `headerDeadline` for a
/// request's headers is cut (its socket shut down; libmicrohttpd then
/// closes it). When an address's unproven connections exceed its share, or
/// the server's open connections its total, the oldest unproven connection
/// still waiting for headers is cut to make room. Only when there is none
/// (every one is in a request) is the newcomer refused, with a 503 answer
/// to its request, never a closed socket.
///
/// A connection that has been answered waits for its next request; while
/// the limits have room it waits as long as the idle timeout allows (a
/// device's next request reuses it). Once half of the total, or of an
/// unproven connection's address share, is taken, answered connections
/// wait only `HTTPServer.keepAliveSeconds`. Not always: a server that
/// closes a kept-alive connection races the client's next request on it,
/// and Foundation on Linux, whose request met the closing socket, sent it
/// again on a new connection without its body and waited for an answer
/// until its timeout.
///
/// `@unchecked Sendable`: every `var` here and in the `GatedConnection`s
/// is touched only while `lock` is held.
final class ConnectionGate: @unchecked Sendable {
    /// Why a request was refused before it was read.
    enum Refusal: Equatable {
        /// The server holds its total of connections.
        case total
        /// The address's unproven share is taken by requests under way.
        case address
    }

    let total: Int
    let perAddress: Int
    /// Nanoseconds an unproven connection may wait for a request's headers.
    let headerDeadline: UInt64

    private let lock = NSLock()
    private var open = 0
    private var unproven: [UInt32: Int] = [:]
    private var waiting = HeaderQueue()
    private var waitingByAddress: [UInt32: HeaderQueue] = [:]
    private var nextTicket: UInt64 = 0
    private var cuts = 0
    private var timer: (any DispatchSourceTimer)?

    init(total: Int, perAddress: Int, headerDeadlineSeconds: Int) {
        self.total = total
        self.perAddress = perAddress
        headerDeadline = UInt64(headerDeadlineSeconds) * 1_000_000_000
        // A scan twice a second: a connection is cut at most half a second past its deadline.
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "outpost.header-deadline", qos: .utility))
        timer.schedule(deadline: .now() + .milliseconds(500), repeating: .milliseconds(500), leeway: .milliseconds(100))
        timer.setEventHandler { [weak self] in self?.cutExpired(now: DispatchTime.now().uptimeNanoseconds) }
        timer.resume()
        self.timer = timer
    }

    deinit { timer?.cancel() }

    /// Stops the deadline's clock (the server is stopping).
    func stop() {
        lock.lock()
        let timer = self.timer
        self.timer = nil
        lock.unlock()
        timer?.cancel()
    }

    /// A connection opened: it counts against its address and the total,
    /// making room by cutting the oldest connections waiting for headers.
    func opened(address: UInt32, socket: Int32) -> GatedConnection {
        let connection = GatedConnection(address: address, socket: socket)
        lock.lock()
        defer { lock.unlock() }
        open += 1
        unproven[address, default: 0] += 1
        enqueue(connection, now: DispatchTime.now().uptimeNanoseconds)
        if unproven[address, default: 0] > perAddress {
            if let victim = waitingByAddress[address]?.oldest(), victim.connection !== connection {
                cut(victim.connection)
                waitingByAddress[address]?.dropOldest()
            } else {
                connection.overShare = true
            }
        }
        if open > total {
            if let victim = waiting.oldest(), victim.connection !== connection {
                cut(victim.connection)
                waiting.dropOldest()
            } else {
                connection.overTotal = true
            }
        }
        return connection
    }

    /// A request's headers arrived. Returns why it must be refused, if it
    /// must: it came on a connection opened past a limit that is still
    /// full. `mayPass`: the request carries a token and no body, so over
    /// its address's share it is still let through to be checked (phones
    /// behind a flooded address keep opening their streams; a body could
    /// hold the slot).
    func headersArrived(_ connection: GatedConnection, mayPass: Bool) -> Refusal? {
        lock.lock()
        defer { lock.unlock() }
        connection.ticket = 0
        trimQueue(of: connection.address)
        guard !connection.proven, !connection.retired else { return nil }
        let refusal: Refusal?
        if connection.overTotal && open > total {
            refusal = .total
        } else {
            connection.overTotal = false
            refusal = headersArrivedOverShare(connection, mayPass: mayPass)
        }
        // Closed after its answer: from now on it leaves room for the next one.
        if refusal != nil { retire(connection) }
        return refusal
    }

    private func headersArrivedOverShare(_ connection: GatedConnection, mayPass: Bool) -> Refusal? {
        guard connection.overShare else { return nil }
        guard unproven[connection.address, default: 0] > perAddress else {
            connection.overShare = false
            return nil
        }
        return mayPass ? nil : .address
    }

    /// A request on the connection authenticated: it leaves its address's
    /// count for good.
    func prove(_ connection: GatedConnection) {
        lock.lock()
        defer { lock.unlock() }
        guard !connection.proven, !connection.retired, !connection.closed else { return }
        connection.proven = true
        connection.ticket = 0
        connection.overShare = false
        connection.overTotal = false
        release(unprovenAt: connection.address)
    }

    /// A request on the connection ended: an unproven one waits for the
    /// next request's headers under the deadline again. Returns whether
    /// the limits are crowded for it (its next request must come soon).
    func requestEnded(_ connection: GatedConnection) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if !connection.proven && !connection.retired && !connection.closed {
            enqueue(connection, now: DispatchTime.now().uptimeNanoseconds)
        }
        return open * 2 >= total
            || (!connection.proven && unproven[connection.address, default: 0] * 2 >= perAddress)
    }

    /// libmicrohttpd closed the connection (it closes the socket after this).
    func closed(_ connection: GatedConnection) {
        lock.lock()
        defer { lock.unlock() }
        guard !connection.closed else { return }
        connection.closed = true
        connection.ticket = 0
        if !connection.retired {
            open -= 1
            if !connection.proven { release(unprovenAt: connection.address) }
        }
        trimQueue(of: connection.address)
    }

    /// Cuts every unproven connection that has waited past the deadline
    /// for a request's headers; returns how many.
    @discardableResult
    func cutExpired(now: UInt64) -> Int {
        lock.lock()
        defer { lock.unlock() }
        var count = 0
        while let oldest = waiting.oldest(), oldest.since + headerDeadline <= now {
            cut(oldest.connection)
            waiting.dropOldest()
            trimQueue(of: oldest.connection.address)
            count += 1
        }
        return count
    }

    /// Connections open now and not cut (tests).
    var openConnections: Int {
        lock.lock()
        defer { lock.unlock() }
        return open
    }

    /// Unproven connections from `address` now (tests).
    func unprovenConnections(from address: UInt32) -> Int {
        lock.lock()
        defer { lock.unlock() }
        return unproven[address] ?? 0
    }

    /// Connections cut since the start (tests, benchmarks).
    var cutConnections: Int {
        lock.lock()
        defer { lock.unlock() }
        return cuts
    }

    // MARK: Under the lock

    private func enqueue(_ connection: GatedConnection, now: UInt64) {
        nextTicket += 1
        connection.ticket = nextTicket
        let entry = HeaderQueue.Entry(ticket: nextTicket, since: now, connection: connection)
        waiting.append(entry)
        waitingByAddress[connection.address, default: HeaderQueue()].append(entry)
    }

    /// Shuts the socket down: libmicrohttpd sees it end and closes it. The
    /// descriptor is still this connection's, since libmicrohttpd closes
    /// it only after `closed`, which waits for the lock held here.
    private func cut(_ connection: GatedConnection) {
        retire(connection)
        cuts += 1
        _ = shutdown(connection.socket, Int32(SHUT_RDWR))
    }

    /// The connection stops counting: it is about to close.
    private func retire(_ connection: GatedConnection) {
        connection.retired = true
        connection.ticket = 0
        open -= 1
        if !connection.proven { release(unprovenAt: connection.address) }
    }

    private func release(unprovenAt address: UInt32) {
        guard let count = unproven[address] else { return }
        unproven[address] = count > 1 ? count - 1 : nil
    }

    /// Drops the stale entries at the front of the address's queue (and the queue once empty).
    private func trimQueue(of address: UInt32) {
        guard var queue = waitingByAddress.removeValue(forKey: address) else { return }
        queue.trim()
        if !queue.isEmpty { waitingByAddress[address] = queue }
    }
}
