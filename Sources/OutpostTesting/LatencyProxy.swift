#if os(Linux)
import Foundation
import Glibc

/// A TCP proxy that delivers every byte a fixed delay after it arrived, in
/// both directions: what a database on another host does to each round
/// trip, without kernel network emulation (which needs root). Bytes keep
/// their order; throughput is not limited.
///
/// Each connection has a reader and a writer thread per direction; the
/// writer holds each chunk until its delivery time.
public final class LatencyProxy: @unchecked Sendable {
    // @unchecked Sendable: `listener` and `stopped` are guarded by `lock`;
    // the rest are immutable after init.
    public let port: UInt16
    private let targetPort: UInt16
    private let oneWay: UInt64
    private let lock = NSLock()
    private var listener: Int32
    private var stopped = false

    /// Listens on a free port of 127.0.0.1 and forwards to
    /// `127.0.0.1:targetPort`, adding `roundTrip` to every round trip (half
    /// each way).
    public init(targetPort: UInt16, roundTrip: Duration) throws {
        self.targetPort = targetPort
        let nanoseconds = roundTrip.components.seconds * 1_000_000_000 + roundTrip.components.attoseconds / 1_000_000_000
        oneWay = UInt64(max(0, nanoseconds / 2))
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SpawnedProcess.SpawnError(reason: "socket failed") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, Glibc.listen(fd, 512) == 0 else {
            close(fd)
            throw SpawnedProcess.SpawnError(reason: "bind or listen failed")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = UInt16(bigEndian: address.sin_port)
        Thread { [self] in acceptLoop(fd) }.start()
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

    private func acceptLoop(_ fd: Int32) {
        while true {
            let client = accept(fd, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: targetPort)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard upstream >= 0, connected == 0 else {
                close(client)
                if upstream >= 0 { close(upstream) }
                continue
            }
            for socket in [client, upstream] {
                var yes: Int32 = 1
                setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
            }
            let ends = Ends(client: client, upstream: upstream)
            Self.pipe(from: client, to: upstream, delay: oneWay, ends: ends)
            Self.pipe(from: upstream, to: client, delay: oneWay, ends: ends)
        }
    }

    /// Closes both sockets once both directions have finished.
    private final class Ends: @unchecked Sendable {
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

    /// Chunks read but not yet due, in arrival order; nil data ends the direction.
    private final class Queue: @unchecked Sendable {
        // @unchecked Sendable: `items` is guarded by `condition`.
        private let condition = NSCondition()
        private var items: [(due: UInt64, data: [UInt8]?)] = []

        func put(_ data: [UInt8]?, due: UInt64) {
            condition.lock()
            items.append((due, data))
            condition.signal()
            condition.unlock()
        }

        func take() -> (due: UInt64, data: [UInt8]?) {
            condition.lock()
            while items.isEmpty { condition.wait() }
            let item = items.removeFirst()
            condition.unlock()
            return item
        }
    }

    private static func pipe(from source: Int32, to destination: Int32, delay: UInt64, ends: Ends) {
        let queue = Queue()
        Thread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else {
                    queue.put(nil, due: now() + delay)
                    return
                }
                queue.put(Array(buffer[0..<count]), due: now() + delay)
            }
        }.start()
        Thread {
            while true {
                let (due, data) = queue.take()
                let current = now()
                if due > current { usleep(UInt32((due - current) / 1_000)) }
                guard let data else {
                    shutdown(destination, Int32(SHUT_WR))
                    ends.finished()
                    return
                }
                var sent = 0
                while sent < data.count {
                    let count = data.withUnsafeBytes {
                        send(destination, $0.baseAddress! + sent, data.count - sent, Int32(MSG_NOSIGNAL))
                    }
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { break }
                    sent += count
                }
                if sent < data.count {
                    shutdown(source, Int32(SHUT_RD))
                }
            }
        }.start()
    }

    private static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }
}
#endif
