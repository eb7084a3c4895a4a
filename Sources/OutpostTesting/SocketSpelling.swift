#if canImport(Glibc)
package import Glibc

/// `socket()`'s type for TCP: Glibc imports `SOCK_STREAM` as an enum case, Darwin as a number.
package let streamSocketType = Int32(SOCK_STREAM.rawValue)
/// `send()`'s flag against SIGPIPE; Darwin has none (``ignoreBrokenPipe(_:)`` sets it on the socket).
package let noSignalFlag = Int32(MSG_NOSIGNAL)

/// Nothing to do on Linux: every `send()` passes ``noSignalFlag``.
package func ignoreBrokenPipe(_ fd: Int32) {}

/// Starts listening (module-qualified, so no member named `listen` can be meant).
package func listenOn(_ fd: Int32, backlog: Int32) -> Int32 { Glibc.listen(fd, backlog) }
#elseif canImport(Darwin)
package import Darwin

package let streamSocketType = SOCK_STREAM
package let noSignalFlag: Int32 = 0

/// A peer that went away makes `send()` fail with EPIPE instead of killing the process.
package func ignoreBrokenPipe(_ fd: Int32) {
    var yes: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &yes, socklen_t(MemoryLayout<Int32>.size))
}

package func listenOn(_ fd: Int32, backlog: Int32) -> Int32 { Darwin.listen(fd, backlog) }
#endif

#if canImport(Glibc) || canImport(Darwin)
/// 127.0.0.1:`port` (Darwin's address also states its own length).
package func loopbackAddress(port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    #if canImport(Darwin)
    address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
    #endif
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return address
}
#endif
