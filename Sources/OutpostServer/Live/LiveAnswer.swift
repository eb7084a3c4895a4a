import Foundation

/// How the HTTP layer answers a request that may wait for changes.
public enum LiveAnswer: Sendable {
    /// Answer now.
    case now(HTTPResponse)
    /// A long poll with nothing to send yet: park the connection until
    /// `poll` is woken, then answer with `poll.respond()`.
    case wait(LongPoll)
    /// A stream: send `200 text/event-stream`, then its events as
    /// `stream.read` produces them.
    case stream(LiveStream)
}

/// Headers of every `GET /v1/stream` answer: never cached, and never
/// buffered by a proxy that honours `X-Accel-Buffering` (nginx).
let streamHeaders = [
    "Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no",
]

/// A `GET /v1/pull?…&wait=N` with nothing after its cursor yet.
public final class LongPoll: Sendable {
    let connection: LiveConnection
    private let server: SyncServer
    private let request: HTTPRequest

    init(connection: LiveConnection, server: SyncServer, request: HTTPRequest) {
        self.connection = connection
        self.server = server
        self.request = request
    }

    /// Parks the waiting connection with `park` unless it was woken
    /// already; `resume` undoes it, from any thread. Returns whether it parked.
    public func park(_ park: () -> Void, resume: @escaping @Sendable () -> Void) -> Bool {
        connection.parkUnlessPending(park: park, resume: resume)
    }

    /// The answer now: the page after the cursor (empty when the wait ran
    /// out, or when asked before it), or the error that closed it.
    public func respond() -> HTTPResponse {
        answer(connection.takePending())
    }

    /// The answer once woken, or nil when it waits on: woken to read again
    /// (a commit of its owners or teams, or a page held back a moment ago by
    /// a transaction still running) and still nothing after its cursor, with
    /// time left. Answering then, it went back empty long before its wait ran
    /// out, and a device polled again for nothing.
    public func answerIfDue() -> HTTPResponse? {
        let pending = connection.takePending()
        if pending.closing == nil, !pending.deadline {
            switch server.longPollRead(request, connection) {
            case .waitOn: return nil
            case .answer(let page):
                server.liveHub.close(connection)
                return page
            case .asUsual: break
            }
        }
        return answer(pending)
    }

    /// Parks the connection with `park` until its answer is due: nil once
    /// parked (`resume` wakes it, and ``answerIfDue()`` is asked again), or
    /// the answer when one was due before it could park.
    public func parkOrAnswer(_ park: () -> Void, resume: @escaping @Sendable () -> Void) -> HTTPResponse? {
        while true {
            if self.park(park, resume: resume) { return nil }
            if let answer = answerIfDue() { return answer }
        }
    }

    private func answer(_ pending: LiveConnection.Pending) -> HTTPResponse {
        server.liveHub.close(connection)
        if let error = pending.closing {
            // The log says why a 503 ended the wait (a shutdown, a revoked token), never "unknown".
            return SyncServer.errorResponse(
                error, user: connection.interest.principal.user, cause: error.status >= 500 ? error.body.message : nil)
        }
        return server.handle(request)
    }

    /// The client went away before the answer.
    public func abandon() { server.liveHub.close(connection) }
}
