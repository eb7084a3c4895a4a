#if canImport(Glibc)
import Foundation
import Glibc
import OutpostCore

/// A tiny HTTP server on a socket that answers each connection with what a
/// test writes by hand: a head and a body apart, gzip bytes, a stream in
/// pieces, or nothing at all. It reads each request's head (and no body).
final class RawHTTPServer: @unchecked Sendable {
    /// One accepted connection, for the test's answer.
    struct Connection: Sendable {
        let socket: Int32
        /// The request's head as it arrived.
        let head: String

        func write(_ bytes: Data) {
            bytes.withUnsafeBytes { raw in
                var sent = 0
                while sent < raw.count {
                    let count = Glibc.send(socket, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
                    if count <= 0 { return }
                    sent += count
                }
            }
        }

        func write(_ text: String) { write(Data(text.utf8)) }

        /// Waits (bounded) for the client to close; true when it did.
        func waitForClose(within seconds: Double) -> Bool {
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let deadline = Date() + seconds
            var byte: UInt8 = 0
            while Date() < deadline {
                guard poll(&descriptor, 1, 100) > 0 else { continue }
                if recv(socket, &byte, 1, 0) <= 0 { return true }
            }
            return false
        }
    }

    let port: UInt16
    private let listener: Int32
    private let stopped = Locked(false)

    /// Listens on 127.0.0.1; `answer` runs on a thread of its own for each connection, which closes after it.
    init(answer: @escaping @Sendable (Connection) -> Void) throws {
        let listening = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        listener = listening
        var yes: Int32 = 1
        setsockopt(listening, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(listening, socketAddress, length) == 0 && listen(listening, 16) == 0
                    && getsockname(listening, socketAddress, &length) == 0
            }
        }
        guard bound else { throw RawServerError(description: "cannot listen: errno \(errno)") }
        port = UInt16(bigEndian: address.sin_port)
        let stopped = self.stopped
        Thread.detachNewThread {
            while !stopped.current {
                let client = accept(listening, nil, nil)
                if client < 0 { return }
                Thread.detachNewThread {
                    answer(Connection(socket: client, head: Self.readHead(client)))
                    close(client)
                }
            }
        }
    }

    deinit { stop() }

    var base: URL { URL(string: "http://127.0.0.1:\(port)")! }

    func stop() {
        let wasStopped = stopped.withLock { stopped in
            defer { stopped = true }
            return stopped
        }
        guard !wasStopped else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private static func readHead(_ socket: Int32) -> String {
        var head = Data()
        var byte: UInt8 = 0
        while !head.suffix(4).elementsEqual([13, 10, 13, 10]) {
            guard recv(socket, &byte, 1, 0) == 1 else { break }
            head.append(byte)
        }
        return String(decoding: head, as: UTF8.self)
    }

    /// A port nothing listens on: bound, then closed.
    static func refusedPort() throws -> UInt16 {
        let server = try RawHTTPServer { _ in }
        let port = server.port
        server.stop()
        return port
    }
}

struct RawServerError: Error, CustomStringConvertible { var description: String }

/// gzip's framing around deflate's raw blocks, written by hand for the tests.
enum GzipFrames {
    /// The ten bytes that open a gzip member.
    static let header = Data([0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0xff])

    /// `bytes` as one deflate stored block, not the last: what a sync
    /// flush makes of a piece a compressor holds, readable at once.
    static func storedBlock(_ bytes: Data) -> Data {
        let count = UInt16(bytes.count)
        return Data([0, UInt8(count & 0xff), UInt8(count >> 8), UInt8(~count & 0xff), UInt8(~count >> 8)]) + bytes
    }

    /// The whole gzip member of `bytes`, compressed by zlib.
    static func gzip(_ bytes: Data) -> Data? {
        // zlib's own framing (2 bytes before, 4 after) holds the raw deflate stream.
        guard let zlib = BodyCompression.deflate(bytes) else { return nil }
        var crc = crc32(bytes).littleEndian
        var size = UInt32(truncatingIfNeeded: bytes.count).littleEndian
        var out = header + zlib.dropFirst(2).dropLast(4)
        withUnsafeBytes(of: &crc) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: &size) { out.append(contentsOf: $0) }
        return out
    }

    static func crc32(_ bytes: Data) -> UInt32 {
        var crc: UInt32 = 0xffff_ffff
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = (crc >> 1) ^ (0xedb8_8320 & (0 &- (crc & 1))) }
        }
        return ~crc
    }
}
#endif
