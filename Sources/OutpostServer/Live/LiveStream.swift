import Foundation
import OutpostCore

/// A `GET /v1/stream` in progress: turns wake-ups into server-sent events.
///
/// Only libmicrohttpd's thread serving the connection calls `read`, one
/// call at a time; the lock makes that plain to the compiler, not a
/// point of contention.
public final class LiveStream: Sendable {
    /// What one `read` produced.
    public enum Output: Equatable, Sendable {
        /// Bytes copied into the buffer.
        case bytes(Int)
        /// Nothing to send: the connection was parked and will be resumed.
        case parked
        /// The stream is over: close the connection.
        case end
    }

    private struct State {
        var cursor: String?
        var buffer: [UInt8] = []
        var sent = 0
        /// Set once the last event is buffered: end after sending it.
        var ending = false
        /// When the token was last checked (monotonic nanoseconds).
        var checkedAt: UInt64 = 0
        var principal: Principal?
    }

    let connection: LiveConnection
    private let server: SyncServer
    private let pull: PullService.Request
    private let state: Locked<State>
    /// Pages sent for one wake-up before the stream yields to others.
    private static let pagesPerWake = 8

    init(connection: LiveConnection, server: SyncServer, pull: PullService.Request, first: PullService.Page?) {
        self.connection = connection
        self.server = server
        self.pull = pull
        var initial = State(cursor: pull.cursor)
        // A heartbeat first: the client (and anything between) sees at once
        // that the stream is open and unbuffered.
        initial.buffer = Self.heartbeat(server)
        if let first {
            initial.cursor = first.cursor
            server.metrics.pulled(records: first.changes)
            if first.changes > 0 { initial.buffer += Self.event(.changes, first.body) }
            if first.hasMore || first.heldBack { connection.signal { $0.changes = true } }
        }
        state = Locked(initial)
    }

    /// Fills up to `capacity` bytes at `into` with the next part of the
    /// stream; when there is nothing to send, parks the connection with
    /// `park` (`resume` undoes it, from any thread).
    public func read(
        into destination: UnsafeMutableRawPointer, capacity: Int, park: () -> Void, resume: @escaping @Sendable () -> Void
    ) -> Output {
        while true {
            let copied = state.withLock { state -> Int? in
                let remaining = state.buffer.count - state.sent
                guard remaining > 0 else {
                    state.buffer.removeAll(keepingCapacity: true)
                    state.sent = 0
                    return state.ending ? -1 : nil
                }
                let count = min(remaining, capacity)
                state.buffer.withUnsafeBytes { bytes in
                    destination.copyMemory(from: bytes.baseAddress! + state.sent, byteCount: count)
                }
                state.sent += count
                return count
            }
            if let copied { return copied < 0 ? .end : .bytes(copied) }
            if produce() { continue }
            if connection.parkUnlessPending(park: park, resume: resume) { return .parked }
        }
    }

    /// The client went away or the server closed the connection.
    public func finished() { server.liveHub.close(connection) }

    /// Turns pending wake-ups into events; false when there was nothing to do.
    private func produce() -> Bool {
        let pending = connection.takePending()
        guard !pending.isEmpty else { return false }
        if let error = pending.closing { return end(with: error) }
        if pending.deadline {
            // The maximum duration: end quietly; the client reconnects from its cursor.
            state.withLock { $0.ending = true }
            return true
        }
        // The token is checked again before events, at most once a second by
        // default (a revocation by any process is noticed within a second anyway):
        // a revoked or expired one ends the stream, whatever else was pending.
        let now = LiveHub.now()
        let recheck = LiveHub.nanoseconds(server.liveHub.settings.tokenRecheck)
        let known = state.withLock { state in state.principal != nil && now - state.checkedAt < recheck ? state.principal : nil }
        let principal: Principal
        if let known {
            principal = known
        } else {
            do {
                principal = try server.tokens.authenticate(connection.token)
            } catch let failure as TokenStore.Failure {
                return end(with: SyncServer.authError(failure))
            } catch {
                return end(with: APIError.unavailable)
            }
            state.withLock { state in
                state.checkedAt = now
                state.principal = principal
            }
        }
        var output: [UInt8] = []
        if pending.changes {
            var cursor = state.withLock { $0.cursor }
            var more = false
            for _ in 0..<Self.pagesPerWake {
                var request = pull
                request.cursor = cursor
                let page: PullService.Page
                do {
                    page = try sharedPage(request, as: principal)
                } catch let error as APIError {
                    return end(with: error, after: output)
                } catch {
                    return end(with: APIError.unavailable, after: output)
                }
                cursor = page.cursor
                if page.heldBack { server.liveHub.recheck(connection) }
                server.metrics.pulled(records: page.changes)
                if page.changes > 0 { output += Self.event(.changes, page.body) }
                more = page.hasMore
                if !more || output.count > 1 << 20 { break }
            }
            let finalCursor = cursor
            state.withLock { $0.cursor = finalCursor }
            // More than one wake's worth: go on once these are sent, so one
            // stream's backlog never holds the thread from the others.
            if more { connection.signal { $0.changes = true } }
        }
        if pending.heartbeat { output += Self.heartbeat(server) }
        guard !output.isEmpty else { return true }
        state.withLock { $0.buffer += output }
        return true
    }

    /// The page after `request.cursor`, read once for every stream of the
    /// same scope at the same position until the next commit.
    private func sharedPage(_ request: PullService.Request, as principal: Principal) throws -> PullService.Page {
        let scope = Scope(principal: principal, config: server.config)
        let after = try request.cursor.map { try PullCursorCodec.decode($0, scopeTag: scope.tag).version } ?? -1
        let key = [
            scope.sharingKey, (request.collections ?? []).sorted().joined(separator: ","), request.windowStart ?? "",
            String(request.limit ?? 0), String(after),
        ].joined(separator: "|")
        let (page, shared) = try server.liveHub.sharedPage(key) {
            try PullService(database: server.feed.source(), config: server.config, clock: server.clock, primary: server.feed.primary).page(request, as: principal)
        }
        guard shared else { return page }
        return page.reissued(cursor: request.cursor, scopeTag: scope.tag, serverTime: ServerTimestamp(server.clock.now()))
    }

    private func end(with error: APIError, after events: [UInt8] = []) -> Bool {
        let body = Array((try? WireCoding.encode(error.body)) ?? Data())
        state.withLock { state in
            state.buffer += events + Self.event(.error, body)
            state.ending = true
        }
        return true
    }

    static func event(_ name: LiveEventName, _ data: [UInt8]) -> [UInt8] {
        Array("event: \(name.rawValue)\ndata: ".utf8) + data + Array("\n\n".utf8)
    }

    static func heartbeat(_ server: SyncServer) -> [UInt8] {
        var body = WireKey.serverTime.opening
        JSONWriter.writeString(ServerTimestamp(server.clock.now()).rawValue, to: &body)
        body.append(UInt8(ascii: "}"))
        return event(.heartbeat, body)
    }
}
