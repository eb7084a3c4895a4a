import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Sockets from each of `sources` that never finish a request's headers
/// (slowloris): `idle` send nothing, `halfSent` send half a push's headers
/// once, `trickling` send one header byte every 300 ms.
final class HeaderFlood: @unchecked Sendable {
    // @unchecked Sendable: the socket lists are set in init; `stopped` is touched under `lock`.
    let sockets: [Int32]
    /// When the first socket was opened: what `closedByServer` measures from.
    let opened = ContinuousClock.now
    private let trickling: [Int32]
    private let lock = NSLock()
    private var stopped = false
    /// Signalled when the trickler has stopped: only then are the sockets
    /// closed, so it never writes to a descriptor number reused meanwhile.
    private let tricklerDone = DispatchSemaphore(value: 0)

    init(port: UInt16, sources: [String], idle: Int = 0, halfSent: Int = 0, trickling count: Int = 0) throws {
        var all: [Int32] = []
        var trickling: [Int32] = []
        do {
            for source in sources {
                for index in 0..<(idle + halfSent + count) {
                    let fd = try RawSocket.connect(port: port, from: source, timeoutSeconds: 5)
                    all.append(fd)
                    if index >= idle + halfSent {
                        trickling.append(fd)
                        HostileSocket.sendAll(fd, Array("GET /v1/pull HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8))
                    } else if index >= idle {
                        HostileSocket.sendAll(fd, Array("POST /v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty".utf8))
                    }
                }
            }
        } catch {
            all.forEach { Glibc.close($0) }
            throw error
        }
        sockets = all
        self.trickling = trickling
        guard !trickling.isEmpty else {
            tricklerDone.signal()
            return
        }
        Thread { [self] in
            while !isStopped {
                for fd in self.trickling { _ = send(fd, "a", 1, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                usleep(300_000)
            }
            tricklerDone.signal()
        }.start()
    }

    private var isStopped: Bool {
        lock.lock()
        defer { lock.unlock() }
        return stopped
    }

    /// How long after `opened` the server closed each socket, watched for
    /// `within`; sockets still open then are left out.
    func closedByServer(within: Duration) -> [Duration] {
        RawSocket.closings(of: sockets, since: opened, until: opened + within)
    }

    func close() {
        lock.lock()
        let wasStopped = stopped
        stopped = true
        lock.unlock()
        guard !wasStopped else { return }
        _ = tricklerDone.wait(timeout: .now() + 5)
        sockets.forEach { Glibc.close($0) }
    }

    deinit { close() }
}
