#if os(Linux) || os(macOS)
public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP relay that behaves like a slow link (a phone on a mobile network):
/// bytes cross it at a set bandwidth in each direction, each arriving half
/// a round trip after it has been sent, and it counts what it carried. In
/// user space, since kernel network emulation (`tc netem`) needs root.
///
/// Each direction is a queue in front of a line: a piece waits for the line
/// to be free, takes `bytes × 8 ÷ bandwidth` to cross it, and is delivered
/// half a round trip later. The queue has no limit (the link's buffer).
public final class LinkRelay: @unchecked Sendable {
    // @unchecked Sendable: `listener` and `stopped` are guarded by `lock`;
    // the counters are `Counted`; the rest is immutable after init.

    /// A link's bandwidth (each way) and round trip.
    public struct Link: Sendable, Equatable, CustomStringConvertible {
        /// Each way; `.infinity` for a link that only delays (``LatencyProxy``).
        public var bitsPerSecond: Double
        public var roundTrip: Duration

        public init(bitsPerSecond: Double, roundTrip: Duration) {
            self.bitsPerSecond = bitsPerSecond
            self.roundTrip = roundTrip
        }

        /// Reads `10mbit:50ms`: a bandwidth in bit, kbit, mbit or gbit (per
        /// second, each way), a colon, and a round trip in ms or s.
        public init(parsing text: String) throws(LinkError) {
            let parts = text.lowercased().split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2 else { throw LinkError(text) }
            let units: [(String, Double)] = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1)]
            guard let (unit, scale) = units.first(where: { parts[0].hasSuffix($0.0) }),
                let rate = Double(parts[0].dropLast(unit.count)), rate.isFinite, rate > 0, rate * scale >= 1_000,
                rate * scale <= 100e9
            else { throw LinkError(text) }
            let delayText = parts[1]
            let milliseconds: Double?
            if delayText.hasSuffix("ms") {
                milliseconds = Double(delayText.dropLast(2))
            } else if delayText.hasSuffix("s") {
                milliseconds = Double(delayText.dropLast(1)).map { $0 * 1000 }
            } else {
                milliseconds = nil
            }
            guard let milliseconds, milliseconds.isFinite, milliseconds >= 0, milliseconds <= 10_000 else { throw LinkError(text) }
            self.init(bitsPerSecond: rate * scale, roundTrip: .microseconds(Int64(milliseconds * 1000)))
        }

        public var description: String {
            let milliseconds = Double(roundTrip.components.seconds) * 1000 + Double(roundTrip.components.attoseconds) / 1e15
            return String(format: "%g Mbit/s each way, %g ms round trip", bitsPerSecond / 1e6, milliseconds)
        }
    }

    /// A `--link` value that is not a bandwidth and a round trip.
    public struct LinkError: Error, Sendable, CustomStringConvertible {
        public let text: String
        init(_ text: String) { self.text = text }
        public var description: String {
            "'\(text)' is not a link: give a bandwidth (1kbit to 100gbit, each way) and a round trip (0 to 10000ms), such as 10mbit:50ms or 1.5mbit:0.2s."
        }
    }

    public let port: UInt16
    public let link: Link
    private let targetPort: UInt16
    private let lock = NSLock()
    private var listener: Int32
    private var stopped = false
    private let down = Counted()
    private let up = Counted()

    /// Bytes carried from the server to the client so far.
    public var bytesDown: Int64 { down.value }
    /// Bytes carried from the client to the server so far.
    public var bytesUp: Int64 { up.value }

    /// Listens on a free port of 127.0.0.1 and relays to `127.0.0.1:targetPort` over `link`.
    public init(targetPort: UInt16, link: Link) throws {
        self.targetPort = targetPort
        self.link = link
        let fd = socket(AF_INET, streamSocketType, 0)
        guard fd >= 0 else { throw SpawnedProcess.SpawnError(reason: "socket failed") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listenOn(fd, backlog: 512) == 0 else {
            close(fd)
            throw SpawnedProcess.SpawnError(reason: "bind or listen failed")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = UInt16(bigEndian: address.sin_port)
        Thread { [self] in accepting(fd) }.start()
    }

    deinit { stop() }

    /// Stops accepting; open connections end when either side closes.
    public func stop() {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { return }
        stopped = true
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    /// The relay's address, for a client.
    public var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    private func accepting(_ fd: Int32) {
        // One line each way, shared by every connection, as on a phone's link.
        let downLine = Line(link: link, counted: down)
        let upLine = Line(link: link, counted: up)
        while true {
            let client = accept(fd, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            let upstream = socket(AF_INET, streamSocketType, 0)
            var address = Self.loopback(port: targetPort)
            let connected = upstream >= 0 && withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            } == 0
            guard connected else {
                close(client)
                if upstream >= 0 { close(upstream) }
                continue
            }
            for socket in [client, upstream] {
                var yes: Int32 = 1
                setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
                ignoreBrokenPipe(socket)
            }
            let pair = SocketPair(client: client, upstream: upstream)
            Self.carry(from: client, to: upstream, over: upLine, pair: pair)
            Self.carry(from: upstream, to: client, over: downLine, pair: pair)
        }
    }

    /// A byte count read from any thread.
    private final class Counted: @unchecked Sendable {
        // @unchecked Sendable: `count` is guarded by `lock`.
        private let lock = NSLock()
        private var count: Int64 = 0
        func add(_ bytes: Int) {
            lock.lock()
            count += Int64(bytes)
            lock.unlock()
        }
        var value: Int64 {
            lock.lock()
            defer { lock.unlock() }
            return count
        }
    }

    /// One direction's line: when each piece has crossed it and arrives.
    private final class Line: @unchecked Sendable {
        // @unchecked Sendable: `free` is guarded by `lock`.
        private let lock = NSLock()
        /// When the line has finished sending what it was given (monotonic ns).
        private var free: UInt64 = 0
        private let nanosecondsPerByte: Double
        private let oneWay: UInt64
        let counted: Counted

        init(link: Link, counted: Counted) {
            nanosecondsPerByte = 8e9 / link.bitsPerSecond
            let components = link.roundTrip.components
            oneWay = UInt64(max(0, components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000) / 2)
            self.counted = counted
        }

        /// When a piece of `bytes` handed over `now` arrives at the far end.
        func arrival(of bytes: Int, at now: UInt64) -> UInt64 {
            lock.lock()
            defer { lock.unlock() }
            free = max(free, now) + UInt64(Double(bytes) * nanosecondsPerByte)
            counted.add(bytes)
            return free + oneWay
        }
    }

    /// Closes both sockets once both directions have finished.
    private final class SocketPair: @unchecked Sendable {
        // @unchecked Sendable: `open` is guarded by `lock`.
        let client: Int32
        let upstream: Int32
        private let lock = NSLock()
        private var open = 2

        init(client: Int32, upstream: Int32) {
            self.client = client
            self.upstream = upstream
        }

        func finished() {
            lock.lock()
            open -= 1
            let last = open == 0
            lock.unlock()
            if last {
                close(client)
                close(upstream)
            }
        }
    }

    /// Pieces in flight in one direction of one connection, in order; nil ends it.
    private final class InFlight: @unchecked Sendable {
        // @unchecked Sendable: `pieces` is guarded by `condition`.
        private let condition = NSCondition()
        private var pieces: [(arrives: UInt64, bytes: [UInt8]?)] = []
        private var first = 0

        func put(_ bytes: [UInt8]?, arrives: UInt64) {
            condition.lock()
            pieces.append((arrives, bytes))
            condition.signal()
            condition.unlock()
        }

        func take() -> (arrives: UInt64, bytes: [UInt8]?) {
            condition.lock()
            defer { condition.unlock() }
            while first == pieces.count { condition.wait() }
            let piece = pieces[first]
            first += 1
            if first > 1024 {
                pieces.removeFirst(first)
                first = 0
            }
            return piece
        }
    }

    /// A piece this large or smaller crosses the line as one: small enough
    /// that delivery follows the bandwidth closely (13 ms at 10 Mbit/s).
    private static let pieceBytes = 16 * 1024

    private static func carry(from source: Int32, to destination: Int32, over line: Line, pair: SocketPair) {
        let inFlight = InFlight()
        Thread {
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else {
                    inFlight.put(nil, arrives: line.arrival(of: 0, at: now()))
                    return
                }
                var start = 0
                while start < count {
                    let end = min(count, start + pieceBytes)
                    inFlight.put(Array(buffer[start..<end]), arrives: line.arrival(of: end - start, at: now()))
                    start = end
                }
            }
        }.start()
        Thread {
            while true {
                let (arrives, bytes) = inFlight.take()
                let current = now()
                if arrives > current { usleep(UInt32(min((arrives - current) / 1_000, 10_000_000))) }
                guard let bytes else {
                    shutdown(destination, Int32(SHUT_WR))
                    pair.finished()
                    return
                }
                var sent = 0
                while sent < bytes.count {
                    let count = bytes.withUnsafeBytes {
                        send(destination, $0.baseAddress! + sent, bytes.count - sent, noSignalFlag)
                    }
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { break }
                    sent += count
                }
                // The far end is gone: stop reading what it will never take.
                if sent < bytes.count { shutdown(source, Int32(SHUT_RD)) }
            }
        }.start()
    }

    private static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    private static func loopback(port: UInt16) -> sockaddr_in { loopbackAddress(port: port) }
}
#endif
