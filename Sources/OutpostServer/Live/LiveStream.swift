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

    /// What a wake-up produced, before it goes on the wire.
    private enum Piece {
        /// This stream's own bytes: a heartbeat, an error.
        case own([UInt8])
        /// A page's event, shared with the other streams that send it,
        /// and this stream's end of it.
        case changes(ChangesEvent, tail: [UInt8])
    }

    private struct State {
        var cursor: String?
        /// The version `cursor` stands at, for the scope tag it was made
        /// for: known when this stream set it, so not decoded again.
        var position: (tag: String, version: Int64)?
        /// Bytes as they go on the wire (compressed when the request asked).
        var buffer: [UInt8] = []
        var sent = 0
        /// Set once the last event is buffered: end after sending it.
        var ending = false
        /// When the token was last checked (monotonic nanoseconds).
        var checkedAt: UInt64 = 0
        var principal: Principal?
        /// The reader's scope, kept while its principal stays the same.
        var scope: ReaderScope?
        /// Set when the stream goes compressed.
        var encoding: StreamEncoding?

        /// Appends `pieces` to the buffer as the wire carries them.
        mutating func write(_ pieces: [Piece]) {
            for piece in pieces {
                switch (piece, encoding != nil) {
                case (.own(let bytes), false):
                    buffer += bytes
                case (.own(let bytes), true):
                    encoding!.appendOwn(bytes, to: &buffer)
                case (.changes(let event, let tail), false):
                    buffer += event.head
                    buffer += tail
                case (.changes(let event, let tail), true):
                    if !encoding!.keepsHistory, let head = event.deflatedHead {
                        encoding!.append(head, to: &buffer)
                        encoding!.appendOwn(tail, to: &buffer)
                    } else {
                        encoding!.appendOwn(event.head + tail, to: &buffer)
                    }
                }
            }
        }

        /// Marks the stream over once the buffer is sent; a compressed one gets its trailer.
        mutating func end() {
            ending = true
            encoding?.finish(to: &buffer)
        }
    }

    let connection: LiveConnection
    private let server: SyncServer
    private let pull: PullService.Request
    private let state: Locked<State>
    /// The coding of the stream's body (`Content-Encoding`), nil when plain.
    package let contentEncoding: String?
    /// Pages sent for one wake-up before the stream yields to others.
    private static let pagesPerWake = 8

    init(
        connection: LiveConnection, server: SyncServer, pull: PullService.Request, first: PullService.Page?,
        format: DeflateFormat? = nil
    ) {
        self.connection = connection
        self.server = server
        self.pull = pull
        contentEncoding = format?.rawValue
        var initial = State(cursor: pull.cursor)
        if let format {
            // A field user's stream carries that user's own records: nothing a
            // team shares, so it deflates them itself, with their history.
            initial.encoding = StreamEncoding(format: format, withHistory: connection.interest.principal.role == .field)
            initial.buffer = initial.encoding!.header
        }
        // A heartbeat first: the client (and anything between) sees at once
        // that the stream is open and unbuffered.
        var pieces = [Piece.own(Self.heartbeat(server))]
        if let first {
            initial.cursor = first.cursor
            server.metrics.pulled(records: first.changes)
            if first.changes > 0 {
                let event = ChangesEvent(page: first, after: pull.cursor)
                pieces.append(.changes(event, tail: event.tail(cursor: first.cursor, serverTime: ServerTimestamp(server.clock.now()))))
            }
            if first.hasMore || first.heldBack { connection.signal { $0.changes = true } }
        }
        initial.write(pieces)
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
            state.withLock { $0.end() }
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
        var pieces: [Piece] = []
        if pending.changes {
            let scope = scope(of: principal)
            var (cursor, position) = state.withLock { ($0.cursor, $0.position) }
            var more = false
            var plainBytes = 0
            let serverTime = ServerTimestamp(server.clock.now())
            for _ in 0..<Self.pagesPerWake {
                let event: ChangesEvent
                do {
                    event = try sharedPage(after: cursor, at: position, scope: scope, as: principal).event
                } catch let error as APIError {
                    return end(with: error, after: pieces)
                } catch {
                    return end(with: APIError.unavailable, after: pieces)
                }
                let page = event.page
                if page.heldBack { server.liveHub.recheck(connection) }
                server.metrics.pulled(records: page.changes)
                // An empty page may still move the cursor (past entries this scope does not see).
                if event.movesCursor {
                    cursor = event.cursor(scopeTag: scope.tag)
                    position = (scope.tag, page.lastVersion)
                }
                if page.changes > 0 {
                    pieces.append(.changes(event, tail: event.tail(scopeTag: scope.tag, serverTime: serverTime)))
                    plainBytes += event.head.count
                }
                more = page.hasMore
                if !more || plainBytes > 1 << 20 { break }
            }
            let (finalCursor, finalPosition) = (cursor, position)
            state.withLock { state in
                state.cursor = finalCursor
                state.position = finalPosition
            }
            // More than one wake's worth: go on once these are sent, so one
            // stream's backlog never holds the thread from the others.
            if more { connection.signal { $0.changes = true } }
        }
        if pending.heartbeat { pieces.append(.own(Self.heartbeat(server))) }
        guard !pieces.isEmpty else { return true }
        state.withLock { $0.write(pieces) }
        return true
    }

    /// Whom a stream reads for: what its pages are shared under, and the
    /// tag its cursors carry.
    private struct ReaderScope {
        let principal: Principal
        /// The shared pages' key but for the position: scope, collections, window, limit.
        let keyPrefix: String
        let tag: String
    }

    /// The reader's scope, worked out again only when the token's principal changes.
    private func scope(of principal: Principal) -> ReaderScope {
        if let known = state.withLock({ $0.scope }), known.principal == principal { return known }
        let scope = Scope(principal: principal, config: server.config)
        let keyPrefix = [
            scope.sharingKey, (pull.collections ?? []).sorted().joined(separator: ","), pull.windowStart ?? "", String(pull.limit ?? 0), "",
        ].joined(separator: "|")
        let made = ReaderScope(principal: principal, keyPrefix: keyPrefix, tag: scope.tag)
        state.withLock { $0.scope = made }
        return made
    }

    /// The page after `cursor`, read once for every stream of the same
    /// scope at the same position until the next commit, and its event
    /// made once for them all.
    private func sharedPage(
        after cursor: String?, at position: (tag: String, version: Int64)?, scope: ReaderScope, as principal: Principal
    ) throws -> (event: ChangesEvent, shared: Bool) {
        // A cursor this stream made for the same scope is not decoded again;
        // one from the request, or made for a scope since changed, is checked.
        let after =
            if let position, position.tag == scope.tag { position.version } else {
                try cursor.map { try PullCursorCodec.decode($0, scopeTag: scope.tag).version } ?? -1
            }
        var request = pull
        request.cursor = cursor
        let key = scope.keyPrefix + String(after)
        return try server.liveHub.sharedPage(key) {
            ChangesEvent(
                page: try PullService(
                    database: server.feed.source(), config: server.config, clock: server.clock, primary: server.feed.primary
                ).page(request, as: principal),
                after: cursor)
        }
    }

    private func end(with error: APIError, after pieces: [Piece] = []) -> Bool {
        let body = Array((try? WireCoding.encode(error.body)) ?? Data())
        state.withLock { state in
            state.write(pieces + [.own(Self.event(.error, body))])
            state.end()
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
