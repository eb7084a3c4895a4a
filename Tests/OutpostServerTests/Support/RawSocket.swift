import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// TCP sockets from a chosen loopback source address (127.0.0.x): the
/// server's connection gate counts per client address, so tests of its
/// shares and floods need to pick the address a socket comes from.
enum RawSocket {
    /// 127.0.0.1 as the gate counts addresses.
    static let loopback: UInt32 = 0x7F00_0001

    /// A socket from `source` connected to 127.0.0.1:`port`, with send and receive timeouts.
    static func connect(port: UInt16, from source: String, timeoutSeconds: Int = 30) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HostileSocket.Failure(description: "socket() failed: errno \(errno)") }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = port.bigEndian
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        let size = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) } }
        let connected = bound == 0 && withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, size) }
        } == 0
        guard connected else {
            let error = errno
            close(fd)
            throw HostileSocket.Failure(description: "connecting from \(source) failed: errno \(error)")
        }
        return fd
    }

    /// One request from `source` with `Connection: close`; its whole answer.
    static func exchange(port: UInt16, from source: String, _ request: String) throws -> HostileSocket.Reply {
        let fd = try connect(port: port, from: source)
        defer { close(fd) }
        HostileSocket.sendAll(fd, Array(request.utf8))
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                received += chunk[0..<count]
            } else if count < 0 && errno == EINTR {
                continue
            } else if count == 0 || !received.isEmpty {
                break
            } else {
                throw HostileSocket.Failure(description: "no answer from the server (errno \(errno))")
            }
        }
        return try HostileSocket.parse(received)
    }

    /// How long after `start` the server closed each of `sockets` (EOF or
    /// reset), watched until `deadline`; sockets still open then are left out.
    static func closings(of sockets: [Int32], since start: ContinuousClock.Instant, until deadline: ContinuousClock.Instant)
        -> [Duration]
    {
        var closed: [Duration] = []
        var open = sockets
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !open.isEmpty && ContinuousClock.now < deadline {
            var polled = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            _ = poll(&polled, nfds_t(polled.count), 100)
            var still: [Int32] = []
            for entry in polled {
                if entry.revents != 0 {
                    let count = buffer.withUnsafeMutableBytes { recv(entry.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                    if count <= 0 && !(count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                        closed.append(ContinuousClock.now - start)
                        continue
                    }
                }
                still.append(entry.fd)
            }
            open = still
        }
        return closed
    }
}
