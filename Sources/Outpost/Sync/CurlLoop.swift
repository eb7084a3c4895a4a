#if canImport(CCurl)
import CCurl
import Foundation
import OutpostCore

/// libcurl's multi interface on one thread of its own: it sleeps in
/// `curl_multi_poll` until a socket has something, a timer of libcurl's
/// or a stream's head deadline is due, or `curl_multi_wakeup` says the
/// inbox has work. An idle open stream costs no wake-up at all.
///
/// The multi handle is not thread-safe: other threads only append to the
/// inbox and wake the loop, which does everything else.
final class CurlLoop: @unchecked Sendable {
    private enum Command {
        case add(CurlExchange)
        case cancel(CurlExchange, TransportError)
    }

    /// `CURLM *`; used on the loop's thread only, but for `curl_multi_wakeup`.
    private let multi: UnsafeMutableRawPointer
    private let inbox = Locked<(commands: [Command], stopping: Bool)>(([], false))
    /// The exchanges in the multi handle, by easy handle (loop thread only).
    private var active: [UnsafeMutableRawPointer: CurlExchange] = [:]
    /// The loop's thread, for its CPU clock (nil once it has ended).
    private let thread = Locked<pthread_t?>(nil)

    /// Starts the loop's thread; `idleConnections` is how many open
    /// connections it keeps for reuse.
    init(idleConnections: Int) {
        _ = curlIsReady
        multi = curl_multi_init()
        _ = outpost_curl_multi_set_long(multi, CURLMOPT_MAXCONNECTS, idleConnections)
        let thread = Thread { [self] in run() }
        thread.name = "outpost-curl"
        // Callbacks only copy bytes and resume waiters.
        thread.stackSize = 512 * 1024
        thread.start()
    }

    /// Hands `exchange` to the loop, which starts it.
    func submit(_ exchange: CurlExchange) {
        send(.add(exchange))
    }

    /// Ends `exchange` with `error` unless it has ended already.
    func cancel(_ exchange: CurlExchange, _ error: TransportError) {
        exchange.cancellation.withLock { if $0 == nil { $0 = error } }
        send(.cancel(exchange, error))
    }

    /// Lets the exchanges under way run to their end, then ends the thread.
    func stop() {
        inbox.withLock { $0.stopping = true }
        curl_multi_wakeup(multi)
    }

    private func send(_ command: Command) {
        inbox.withLock { $0.commands.append(command) }
        curl_multi_wakeup(multi)
    }

    /// The CPU time the loop's thread has used; nil before it starts and after it ends.
    var cpuTime: Duration? {
        thread.withLock { thread in
            guard let thread else { return nil }
            var clock = clockid_t()
            var time = timespec()
            guard pthread_getcpuclockid(thread, &clock) == 0, clock_gettime(clock, &time) == 0 else { return nil }
            return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
        }
    }

    private func run() {
        thread.withLock { $0 = pthread_self() }
        defer { thread.withLock { $0 = nil } }
        while true {
            let (commands, stopping) = inbox.withLock { inbox in
                defer { inbox.commands.removeAll() }
                return (inbox.commands, inbox.stopping)
            }
            for command in commands { apply(command) }
            var running: Int32 = 0
            _ = curl_multi_perform(multi, &running)
            collectFinished()
            let wait = expireHeads()
            if stopping && active.isEmpty { break }
            _ = curl_multi_poll(multi, nil, 0, wait, nil)
        }
        curl_multi_cleanup(multi)
    }

    private func apply(_ command: Command) {
        switch command {
        case .add(let exchange):
            if let early = exchange.cancellation.current {
                exchange.finish(early)
                exchange.close()
                return
            }
            guard curl_multi_add_handle(multi, exchange.handle) == CURLM_OK else {
                exchange.finish(.notSent("the transfer could not start"))
                exchange.close()
                return
            }
            active[exchange.handle] = exchange
        case .cancel(let exchange, let error):
            end(exchange, error)
        }
    }

    private func end(_ exchange: CurlExchange, _ failure: TransportError?) {
        // A handle's address is reused once freed: an old exchange's late cancel must not end a new one.
        guard active[exchange.handle] === exchange else { return }
        active.removeValue(forKey: exchange.handle)
        curl_multi_remove_handle(multi, exchange.handle)
        exchange.finish(failure)
        exchange.close()
    }

    private func collectFinished() {
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle,
                let exchange = active[handle]
            else { continue }
            let code = message.pointee.data.result
            end(exchange, code == CURLE_OK ? nil : exchange.failure(code))
        }
    }

    /// Ends the streams whose head is late; returns how long the loop may
    /// sleep before the next head deadline (libcurl shortens it for its own timers).
    private func expireHeads() -> Int32 {
        let now = ContinuousClock.now
        var wait = Duration.seconds(30)
        for exchange in Array(active.values) {
            guard let deadline = exchange.headDeadline, !exchange.headArrivedYet else { continue }
            if deadline <= now {
                end(exchange, .noAnswer("no answer within \(exchange.headWait) seconds"))
            } else {
                wait = min(wait, deadline - now)
            }
        }
        let milliseconds = wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000
        return Int32(max(1, milliseconds + 1))
    }
}
#endif
