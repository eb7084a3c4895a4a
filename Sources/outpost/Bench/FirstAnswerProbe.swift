import Foundation
import Outpost
import OutpostCore

/// What one device saw of its first request after coming back: how long
/// it waited, and whether an answer came at all (a timeout or a refused
/// connection is no answer). The reconnect storm is judged by this, not by
/// what the server's thread pool holds at once.
final class FirstAnswerProbe: Sendable {
    struct First: Sendable {
        /// Seconds from sending the request to its answer (or its failure).
        var wait: Double
        /// Monotonic nanoseconds when it ended.
        var answeredAt: UInt64
        var answered: Bool
    }

    private struct State {
        /// Requests sent before this (monotonic nanoseconds) are not the one watched.
        var armedAt: UInt64 = .max
        var first: First?
    }

    private let state = Locked(State())

    var first: First? { state.current.first }

    /// From now on, the next request to end is the one recorded.
    func arm() {
        state.withLock { $0 = State(armedAt: DispatchTime.now().uptimeNanoseconds) }
    }

    /// `transport`, with its first request's outcome recorded here.
    func watching(_ transport: any SyncTransport) -> any SyncTransport {
        Watched(inner: transport, probe: self)
    }

    fileprivate func record(sentAt: UInt64, answered: Bool) {
        let now = DispatchTime.now().uptimeNanoseconds
        state.withLock { state in
            guard sentAt >= state.armedAt, state.first == nil else { return }
            state.first = First(wait: Double(now - sentAt) / 1e9, answeredAt: now, answered: answered)
        }
    }

    private struct Watched: SyncTransport {
        let inner: any SyncTransport
        let probe: FirstAnswerProbe

        func send(_ request: TransportRequest) async throws -> TransportResponse {
            let sentAt = DispatchTime.now().uptimeNanoseconds
            do {
                let response = try await inner.send(request)
                probe.record(sentAt: sentAt, answered: true)
                return response
            } catch TransportError.cancelled {
                throw TransportError.cancelled
            } catch {
                probe.record(sentAt: sentAt, answered: false)
                throw error
            }
        }

        func openStream(_ request: TransportRequest) async throws -> TransportStream {
            try await inner.openStream(request)
        }
    }
}
