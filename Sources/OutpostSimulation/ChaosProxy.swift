public import Foundation
import OutpostCore
import OutpostTesting

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a ``ChaosProxy`` does to the traffic it carries.
///
/// A mode is read when a connection is accepted and again for every chunk
/// of bytes, so a change also reaches connections that HTTP keep-alive
/// keeps open: a pooled connection cannot dodge a fault by having been
/// opened while the network was healthy.
public enum ChaosMode: Sendable, Equatable, CustomStringConvertible {
    /// Forward everything as is.
    case pass
    /// Hold every chunk this long, in both directions.
    case latency(Duration)
    /// Forward requests as is and answers in tiny pieces at this rate.
    case slowDrip(bytesPerSecond: Int)
    /// Accept, read and discard the request; never answer, never close.
    case blackhole
    /// Forward the request (the server acts on it), drop the server's
    /// answer and reset the client's connection: "insert confirmed but
    /// response lost".
    case resetAfterRequest
    /// Accept and keep the connection open, passing nothing either way:
    /// a socket open but dead.
    case silentOpen
    /// Close every accepted connection at once: the server is down.
    case refuse
    /// Forward everything, and on every new live stream (`text/event-stream`
    /// in chunks) repeat the `changes` events earlier streams carried, after
    /// the new stream's first chunk: old events delivered after a
    /// reconnection, which the client must drop.
    case replayOldEvents
    /// Each connection is cut (reset both ways) once it has carried this
    /// many bytes from the client: an upload that stops mid-body, as when
    /// a phone walks out of coverage.
    case cutAfterClientBytes(Int)
    /// Whichever connection carries the client's byte number N, 2N, 3N…
    /// (counted over all connections) is cut there: an uplink that drops
    /// every N bytes of upload, whatever the requests.
    case cutEvery(bytes: Int)
    /// Bytes from the client reach the server at most this fast: a slow
    /// uplink, so an upload is still under way when a test interrupts it.
    case slowUpload(bytesPerSecond: Int)

    public var description: String {
        switch self {
        case .pass: return "pass"
        case .latency(let delay): return "latency(\(delay))"
        case .slowDrip(let rate): return "slowDrip(\(rate) B/s)"
        case .blackhole: return "blackhole"
        case .resetAfterRequest: return "resetAfterRequest"
        case .silentOpen: return "silentOpen"
        case .refuse: return "refuse"
        case .replayOldEvents: return "replayOldEvents"
        case .cutAfterClientBytes(let bytes): return "cutAfterClientBytes(\(bytes))"
        case .slowUpload(let rate): return "slowUpload(\(rate) B/s)"
        case .cutEvery(let bytes): return "cutEvery(\(bytes) B)"
        }
    }
}

/// The proxy could not start.
public struct ChaosProxyError: Error, Sendable, CustomStringConvertible {
    public var description: String
}

/// A fault-injecting TCP proxy for tests: listens on 127.0.0.1 and forwards
/// each connection to a server on 127.0.0.1, doing to the bytes what
/// ``mode`` says. Kernel network emulation is not available on the
/// test machines, so faults are made here, in user space, between a real
/// client and a real server.
///
/// It never connects anywhere but the loopback address. One thread accepts;
/// each connection gets one thread that polls both sockets, so a socket is
/// only ever read, written and closed by the thread that owns it.
///
/// ```swift
/// let proxy = try ChaosProxy(upstreamPort: http.port)
/// defer { proxy.stop() }
/// proxy.mode = .resetAfterRequest
/// ```
///
/// It needs no `@unchecked Sendable`: `port` and `upstreamPort` are
/// immutable, and every mutable value (mode, counters, the stop flag) lives
/// in `shared`, whose fields are only read or written while its lock is
/// held. Sockets are not shared: the listener belongs to the accept thread
/// and each connection's two sockets to that connection's thread, which
/// alone reads, writes and closes them.
public final class ChaosProxy: Sendable {
    /// The port the proxy listens on, on 127.0.0.1.
    public let port: UInt16
    /// The port on 127.0.0.1 it forwards to.
    public let upstreamPort: UInt16
    private let shared: ChaosShared

    /// Starts listening on 127.0.0.1:`port` (0 picks a free port) and
    /// forwarding to 127.0.0.1:`upstreamPort`.
    public init(upstreamPort: UInt16, port: UInt16 = 0, mode: ChaosMode = .pass) throws {
        self.upstreamPort = upstreamPort
        let listener = socket(AF_INET, ChaosSocket.stream, 0)
        guard listener >= 0 else { throw ChaosProxyError(description: "socket() failed: \(ChaosSocket.lastError())") }
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = ChaosSocket.loopback(port: port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(listener, 128) == 0 else {
            let error = ChaosSocket.lastError()
            close(listener)
            throw ChaosProxyError(description: "could not listen on 127.0.0.1:\(port): \(error)")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        self.port = UInt16(bigEndian: actual.sin_port)
        let shared = ChaosShared(mode: mode)
        self.shared = shared
        shared.group.enter()
        let thread = Thread { [upstreamPort] in
            ChaosProxy.acceptLoop(listener: listener, upstreamPort: upstreamPort, shared: shared)
            shared.group.leave()
        }
        thread.name = "ChaosProxy accept :\(self.port)"
        thread.start()
    }

    deinit { stop() }

    /// `http://127.0.0.1:<port>`, for a client's base URL.
    public var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// What the proxy does now: read for every new connection and every
    /// chunk on connections already open.
    public var mode: ChaosMode {
        get { shared.withLock { $0.mode } }
        set { shared.withLock { $0.mode = newValue } }
    }

    /// Connections accepted since the start, refused ones included.
    public var connectionsAccepted: Int { shared.withLock { $0.connectionsAccepted } }
    /// Connections whose thread is still running.
    public var openConnections: Int { shared.withLock { $0.openConnections } }
    /// Bytes read from clients (forwarded or not).
    public var bytesFromClients: Int { shared.withLock { $0.bytesFromClients } }
    /// Bytes written to the server.
    public var bytesToServer: Int { shared.withLock { $0.bytesToServer } }
    /// Bytes read from the server (forwarded or not).
    public var bytesFromServer: Int { shared.withLock { $0.bytesFromServer } }
    /// Bytes written to clients.
    public var bytesToClients: Int { shared.withLock { $0.bytesToClients } }
    /// Client connections ended with a reset (``ChaosMode/resetAfterRequest``, ``ChaosMode/refuse``).
    public var resetsSent: Int { shared.withLock { $0.resetsSent } }
    /// Connections cut mid-way by ``ChaosMode/cutAfterClientBytes(_:)``.
    public var cuts: Int { shared.withLock { $0.cuts } }
    /// Old events repeated on newer streams (``ChaosMode/replayOldEvents``).
    public var lateDuplicatesInjected: Int { shared.withLock { $0.lateDuplicatesInjected } }

    /// Closes the listener and every connection, and waits for every thread
    /// to end. Safe to call more than once.
    public func stop() {
        shared.withLock { $0.stopped = true }
        shared.group.wait()
    }

    // MARK: Threads

    private static func acceptLoop(listener: Int32, upstreamPort: UInt16, shared: ChaosShared) {
        defer { close(listener) }
        while !shared.isStopped {
            var poller = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, ChaosSocket.pollMilliseconds) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            let (mode, number) = shared.withLock { state -> (ChaosMode, Int) in
                state.connectionsAccepted += 1
                return (state.mode, state.connectionsAccepted)
            }
            if mode == .refuse {
                // The server is down: the connection ends before any byte.
                // Counted first: a test that saw the reset reads the count.
                shared.withLock { $0.resetsSent += 1 }
                ChaosSocket.reset(client)
                continue
            }
            shared.withLock { $0.openConnections += 1 }
            shared.group.enter()
            let thread = Thread {
                var connection = ChaosConnection(shared: shared, client: client, upstreamPort: upstreamPort, number: number)
                connection.run(acceptedIn: mode)
                shared.withLock { $0.openConnections -= 1 }
                shared.group.leave()
            }
            thread.name = "ChaosProxy connection"
            thread.start()
        }
    }
}

/// The proxy's mutable state, behind one lock.
///
/// `Sendable` without `@unchecked`: `state` is a `Locked`, reachable only
/// through `withLock`; `group` is a DispatchGroup, itself thread-safe.
private final class ChaosShared: Sendable {
    struct State {
        var mode: ChaosMode
        var stopped = false
        var connectionsAccepted = 0
        var openConnections = 0
        var bytesFromClients = 0
        var bytesToServer = 0
        var bytesFromServer = 0
        var bytesToClients = 0
        var resetsSent = 0
        var cuts = 0
        /// Client bytes forwarded on every connection (``ChaosMode/cutEvery(bytes:)``).
        var clientBytesForwarded = 0
        var lateDuplicatesInjected = 0
        /// `changes` events streams carried, with the connection that carried them.
        var streamEvents: [(connection: Int, event: [UInt8])] = []
    }

    private let state: Locked<State>
    let group = DispatchGroup()

    init(mode: ChaosMode) { state = Locked(State(mode: mode)) }

    func withLock<T>(_ body: (inout State) -> T) -> T {
        state.withLock(body)
    }

    var isStopped: Bool { withLock { $0.stopped } }
    var mode: ChaosMode { withLock { $0.mode } }
}

/// One client connection and its upstream, owned by one thread.
private struct ChaosConnection {
    /// What the connection does from now on, whatever the mode becomes.
    enum Fate {
        /// Bytes flow, shaped by the current mode.
        case live
        /// Client bytes are read and dropped; nothing is sent back.
        case discarding
        /// Nothing is read or written.
        case silent
        /// The connection is over.
        case closed
    }

    let shared: ChaosShared
    let client: Int32
    let upstreamPort: UInt16
    var upstream: Int32 = -1
    var fate = Fate.live
    var clientOpen = true
    /// A request went up under `.resetAfterRequest`: its answer is dropped.
    var resetArmed = false
    /// The start of the server's answer while deciding whether it is an
    /// interim `100 Continue` (passed on) or the answer (dropped).
    var answerHead: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    /// Which connection this is (the accept order), to tell its events from older ones.
    let number: Int
    /// The server's answers on this connection, read as event streams.
    var tap = EventStreamTap()
    /// Old events were repeated on this connection already.
    var replayed = false
    /// Client bytes forwarded on this connection (``ChaosMode/cutAfterClientBytes(_:)``).
    var forwardedFromClient = 0

    init(shared: ChaosShared, client: Int32, upstreamPort: UInt16, number: Int) {
        self.shared = shared
        self.client = client
        self.upstreamPort = upstreamPort
        self.number = number
    }

    mutating func run(acceptedIn mode: ChaosMode) {
        defer {
            if upstream >= 0 { close(upstream) }
            if clientOpen { close(client) }
        }
        ChaosSocket.configure(client)
        switch mode {
        case .blackhole: fate = .discarding
        case .silentOpen: fate = .silent
        default:
            guard let upstream = ChaosSocket.connectLoopback(port: upstreamPort) else {
                // Nothing listens behind the proxy: the server is down.
                resetClient()
                return
            }
            self.upstream = upstream
        }
        while !shared.isStopped {
            switch fate {
            case .live: pumpOnce()
            case .discarding: discardOnce()
            case .silent: waitSilently()
            case .closed: return
            }
        }
    }

    // MARK: The three fates

    private mutating func pumpOnce() {
        var pollers = [
            pollfd(fd: client, events: Int16(POLLIN), revents: 0),
            pollfd(fd: upstream, events: Int16(POLLIN), revents: 0),
        ]
        guard poll(&pollers, 2, ChaosSocket.pollMilliseconds) > 0 else { return }
        let ready = Int16(POLLIN) | Int16(POLLHUP) | Int16(POLLERR)
        if pollers[0].revents & ready != 0 {
            let count = receive(from: client)
            guard count > 0 else {
                if count == 0 || !ChaosSocket.isTransient(errno) { fate = .closed }
                return
            }
            shared.withLock { $0.bytesFromClients += count }
            fromClient(count)
        }
        guard fate == .live else { return }
        if pollers[1].revents & ready != 0 {
            let count = receive(from: upstream)
            guard count > 0 else {
                if count == 0 || !ChaosSocket.isTransient(errno) { fate = .closed }
                return
            }
            shared.withLock { $0.bytesFromServer += count }
            fromServer(count)
        }
    }

    private mutating func discardOnce() {
        var poller = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, ChaosSocket.pollMilliseconds) > 0 else { return }
        let count = receive(from: client)
        if count > 0 {
            shared.withLock { $0.bytesFromClients += count }
        } else if count == 0 || !ChaosSocket.isTransient(errno) {
            // The client gave up and closed: nothing left to hold open.
            fate = .closed
        }
    }

    private mutating func waitSilently() {
        // Only notice the client hanging up; never read what it sent.
        var poller = pollfd(fd: client, events: ChaosSocket.peerClosedEvent, revents: 0)
        guard poll(&poller, 1, ChaosSocket.pollMilliseconds) > 0 else { return }
        let gone = ChaosSocket.peerClosedEvent | Int16(POLLHUP) | Int16(POLLERR)
        if poller.revents & gone != 0 { fate = .closed }
    }

    // MARK: Shaping

    private mutating func fromClient(_ count: Int) {
        switch shared.mode {
        case .pass, .slowDrip, .replayOldEvents:
            forward(count, to: upstream)
        case .latency(let delay):
            guard ChaosSocket.pause(delay, shared) else { return }
            forward(count, to: upstream)
        case .resetAfterRequest:
            resetArmed = true
            forward(count, to: upstream)
        case .blackhole:
            fate = .discarding
        case .silentOpen:
            fate = .silent
        case .refuse:
            resetClient()
        case .slowUpload:
            dripUp(count)
        case .cutEvery(let every):
            let allowed = shared.withLock { state -> Int in
                let next = (state.clientBytesForwarded / every + 1) * every
                let allowed = min(count, next - state.clientBytesForwarded)
                state.clientBytesForwarded += allowed
                return allowed
            }
            forward(allowed, to: upstream)
            if allowed < count || shared.withLock({ $0.clientBytesForwarded % every == 0 }) {
                shared.withLock { $0.cuts += 1 }
                resetClient()
                ChaosSocket.reset(upstream)
                upstream = -1
            }
        case .cutAfterClientBytes(let limit):
            let allowed = max(0, min(count, limit - forwardedFromClient))
            if allowed > 0 { forward(allowed, to: upstream) }
            forwardedFromClient += allowed
            if forwardedFromClient >= limit {
                // Both ways: the server sees its request's body stop short.
                shared.withLock { $0.cuts += 1 }
                resetClient()
                ChaosSocket.reset(upstream)
                upstream = -1
            }
        }
    }

    private mutating func fromServer(_ count: Int) {
        let mode = shared.mode
        if resetArmed || mode == .resetAfterRequest {
            dropAnswer(count)
            return
        }
        switch mode {
        case .pass, .resetAfterRequest, .cutAfterClientBytes, .slowUpload, .cutEvery:
            forward(count, to: client)
        case .replayOldEvents:
            forwardReplaying(count)
        case .latency(let delay):
            guard ChaosSocket.pause(delay, shared) else { return }
            forward(count, to: client)
        case .slowDrip:
            drip(count)
        case .blackhole:
            fate = .discarding
        case .silentOpen:
            fate = .silent
        case .refuse:
            resetClient()
        }
    }

    /// Passes interim `1xx` answers (`100 Continue`, which a client may wait
    /// for before sending a body) and resets the client at the first byte
    /// of the real answer: by then the server has acted on the request.
    private mutating func dropAnswer(_ count: Int) {
        answerHead += buffer[0..<count]
        while true {
            // "HTTP/1.1 1xx": the status's first digit is at offset 9.
            guard answerHead.count >= 10 else { return }
            let interim = answerHead.starts(with: Array("HTTP/1.".utf8)) && answerHead[9] == UInt8(ascii: "1")
            guard interim else { break }
            guard let end = ChaosSocket.endOfHead(answerHead) else { return }
            let head = Array(answerHead[0..<end])
            answerHead.removeFirst(end)
            let sent = head.withUnsafeBytes { ChaosSocket.sendAll(client, $0, shared) }
            guard sent else {
                fate = .closed
                return
            }
            shared.withLock { $0.bytesToClients += head.count }
            if answerHead.isEmpty { return }
        }
        answerHead.removeAll()
        resetClient()
    }

    /// Sends the answer in pieces of 1/50 of the rate every 20 ms; if the
    /// mode changes meanwhile (the network healed), the rest goes at once.
    private mutating func drip(_ count: Int) {
        var offset = 0
        while offset < count {
            guard !shared.isStopped else {
                fate = .closed
                return
            }
            guard case .slowDrip(let rate) = shared.mode else {
                forward(offset..<count, to: client)
                return
            }
            let end = min(count, offset + max(1, rate / 50))
            forward(offset..<end, to: client)
            guard fate == .live else { return }
            offset = end
            if offset < count { Thread.sleep(forTimeInterval: 0.02) }
        }
    }

    /// Sends the client's bytes in pieces of 1/50 of the rate every 20 ms
    /// (all at once when the mode changes meanwhile).
    private mutating func dripUp(_ count: Int) {
        var offset = 0
        while offset < count {
            guard !shared.isStopped else {
                fate = .closed
                return
            }
            guard case .slowUpload(let rate) = shared.mode else {
                forward(offset..<count, to: upstream)
                return
            }
            let end = min(count, offset + max(1, rate / 50))
            forward(offset..<end, to: upstream)
            guard fate == .live else { return }
            offset = end
            if offset < count { Thread.sleep(forTimeInterval: 0.02) }
        }
    }

    // MARK: Sockets

    private mutating func receive(from socket: Int32) -> Int {
        buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
    }

    private mutating func forward(_ count: Int, to socket: Int32) {
        forward(0..<count, to: socket)
    }

    private mutating func forward(_ range: Range<Int>, to socket: Int32) {
        let shared = self.shared
        let sent = buffer.withUnsafeBytes { ChaosSocket.sendAll(socket, UnsafeRawBufferPointer(rebasing: $0[range]), shared) }
        guard sent else {
            fate = .closed
            return
        }
        let toClient = socket == client
        shared.withLock { state in
            if toClient { state.bytesToClients += range.count } else { state.bytesToServer += range.count }
        }
    }

    /// Forwards the server's bytes; on a stream's first chunk boundary,
    /// sends older streams' `changes` events as chunks of their own.
    private mutating func forwardReplaying(_ count: Int) {
        let (boundaries, changes) = tap.feed(buffer[0..<count])
        let number = self.number
        if !changes.isEmpty {
            shared.withLock { state in
                state.streamEvents += changes.map { (number, $0) }
                if state.streamEvents.count > 32 { state.streamEvents.removeFirst(state.streamEvents.count - 32) }
            }
        }
        guard !replayed, let boundary = boundaries.first else {
            forward(count, to: client)
            return
        }
        let old = shared.withLock { state in state.streamEvents.filter { $0.connection < number }.map(\.event) }
        guard !old.isEmpty else {
            forward(count, to: client)
            return
        }
        replayed = true
        forward(0..<boundary, to: client)
        guard fate == .live else { return }
        var late: [UInt8] = []
        for event in old { late += EventStreamTap.chunk(event) }
        guard late.withUnsafeBytes({ ChaosSocket.sendAll(client, $0, shared) }) else {
            fate = .closed
            return
        }
        shared.withLock { state in
            state.bytesToClients += late.count
            state.lateDuplicatesInjected += old.count
        }
        forward(boundary..<count, to: client)
    }

    /// Ends the client's connection with a TCP reset, not a graceful close.
    private mutating func resetClient() {
        guard clientOpen else { return }
        // Counted before the reset: a client that saw it (and a test that
        // then reads the count) must find it counted.
        shared.withLock { $0.resetsSent += 1 }
        ChaosSocket.reset(client)
        clientOpen = false
        fate = .closed
    }
}

/// Small POSIX helpers, loopback only.
private enum ChaosSocket {
    static let pollMilliseconds: Int32 = 20

    #if canImport(Glibc)
    static let stream = Int32(SOCK_STREAM.rawValue)
    static let noSignal = Int32(MSG_NOSIGNAL)
    /// The peer closed its side (Linux `POLLRDHUP`).
    static let peerClosedEvent = Int16(0x2000)
    #else
    static let stream = SOCK_STREAM
    static let noSignal: Int32 = 0
    static let peerClosedEvent = Int16(POLLHUP)
    #endif

    static func lastError() -> String { String(cString: strerror(errno)) }

    static func isTransient(_ code: Int32) -> Bool { code == EINTR || code == EAGAIN || code == EWOULDBLOCK }

    /// 127.0.0.1:`port`: the only address this proxy ever uses.
    static func loopback(port: UInt16) -> sockaddr_in { loopbackAddress(port: port) }

    static func connectLoopback(port: UInt16) -> Int32? {
        let fd = socket(AF_INET, stream, 0)
        guard fd >= 0 else { return nil }
        var address = loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            return nil
        }
        configure(fd)
        return fd
    }

    /// No Nagle delay (tiny drip pieces go out as they are written), and a
    /// send timeout so a peer that stops reading cannot hold a thread past stop().
    static func configure(_ fd: Int32) {
        var yes: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
        #if canImport(Darwin)
        setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &yes, socklen_t(MemoryLayout<Int32>.size))
        #endif
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// SO_LINGER 0 then close: the peer gets RST, not FIN.
    static func reset(_ fd: Int32) {
        var option = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
        close(fd)
    }

    /// Sends everything unless the peer is gone or the proxy stops. Never raises SIGPIPE.
    static func sendAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, _ shared: ChaosShared) -> Bool {
        var offset = 0
        while offset < bytes.count {
            guard !shared.isStopped, let base = bytes.baseAddress else { return false }
            let sent = send(fd, base + offset, bytes.count - offset, noSignal)
            if sent > 0 {
                offset += sent
            } else if sent < 0 && isTransient(errno) {
                continue  // the send timeout passed: check for stop and try again
            } else {
                return false
            }
        }
        return true
    }

    /// Sleeps `delay` in short steps; false when the proxy stopped meanwhile.
    static func pause(_ delay: Duration, _ shared: ChaosShared) -> Bool {
        let deadline = ContinuousClock.now + delay
        while ContinuousClock.now < deadline {
            guard !shared.isStopped else { return false }
            let left = deadline - ContinuousClock.now
            let step = min(left, .milliseconds(20))
            let seconds = Double(step.components.seconds) + Double(step.components.attoseconds) / 1e18
            if seconds > 0 { Thread.sleep(forTimeInterval: seconds) }
        }
        return !shared.isStopped
    }

    /// The index just past the `\r\n\r\n` that ends an HTTP head, if it arrived.
    static func endOfHead(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index + 4
        }
        return nil
    }
}
