import Foundation
import OutpostCore

/// Every waiting connection of this server process (long polls and
/// streams), indexed by whom they serve, so a commit wakes only the
/// connections whose scope it may touch, and a clock that ends long polls,
/// sends heartbeats and closes streams at their maximum duration.
///
/// No thread waits for a connection: a parked connection is suspended in
/// libmicrohttpd and costs its socket and this entry.
final class LiveHub: Sendable {
    struct Settings: Sendable {
        /// A stream sends a heartbeat at least this often.
        var heartbeat: Duration = .seconds(15)
        /// A stream is closed after this long; the client reconnects from its cursor.
        var maxStreamDuration: Duration = .seconds(300)
        /// A stream checks its token again after this long.
        var tokenRecheck: Duration = .seconds(1)
        /// Live channels (streams and long polls) one user may hold at once:
        /// what bounds a signed-in fleet, whatever address it shares.
        var maxPerUser = 16
    }

    enum Kind: Sendable { case longPoll, stream }

    private struct Entry {
        let connection: LiveConnection
        let kind: Kind
        var nextHeartbeat: UInt64
    }

    private struct State {
        var entries: [UInt64: Entry] = [:]
        var byUser: [String: Set<UInt64>] = [:]
        var byTeam: [String: Set<UInt64>] = [:]
        /// Live channels held by each user, whatever the role.
        var perUser: [String: Int] = [:]
        /// Admins: every commit in their collections concerns them.
        var everyone: Set<UInt64> = []
        var nextID: UInt64 = 0
        var closing: APIError?
    }

    let settings: Settings
    /// Pages read since the last commit this process heard of, shared by
    /// connections that read the same thing: a commit to a team wakes every
    /// coordinator's stream, and the page is read once, not once each.
    private let pages = Locked(SharedPages())

    private struct SharedPages {
        /// Bumped by every commit heard, before any connection is woken.
        var commits: UInt64 = 0
        var entries: [String: ChangesEvent] = [:]
        /// Reads saved by sharing, since the start (tests and benchmarks look).
        var hits = 0
    }

    /// Page reads saved by sharing them between connections.
    var sharedPageHits: Int { pages.withLock { $0.hits } }
    /// This process among the servers sharing a database: its own
    /// announcements, heard back, are not acted on twice.
    let origin = UUID().uuidString
    private let state = Locked(State())
    // Made and started in `init`, cancelled in `deinit`; never touched between.
    // Darwin's timer is Sendable, Linux's is not.
    #if canImport(Darwin)
    private let timer: any DispatchSourceTimer
    #else
    nonisolated(unsafe) private let timer: any DispatchSourceTimer
    #endif
    /// Called on the hub's clock while connections wait: how the server
    /// notices revocations made by another process (the CLI).
    private let onTick: Locked<(@Sendable ([LiveConnection]) -> Void)?> = Locked(nil)

    init(settings: Settings = Settings()) {
        self.settings = settings
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "outpost.live-hub"))
        timer.schedule(deadline: .now() + .milliseconds(250), repeating: .milliseconds(250), leeway: .milliseconds(50))
        timer.setEventHandler { [weak self] in self?.tick() }
        timer.resume()
    }

    deinit { timer.cancel() }

    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    static func nanoseconds(_ duration: Duration) -> UInt64 {
        UInt64(max(0, duration.components.seconds)) * 1_000_000_000 + UInt64(max(0, duration.components.attoseconds / 1_000_000_000))
    }

    /// Registers a waiting connection. Throws `unavailable` while the
    /// server shuts down, and when the user holds `maxPerUser` live
    /// channels already. `wait` is the long poll's wait, ignored for
    /// streams (they last up to the maximum duration).
    func open(kind: Kind, interest: LiveInterest, token: String?, wait: Duration, changesPending: Bool) throws -> LiveConnection {
        let now = Self.now()
        let user = interest.principal.user
        return try state.withLock { state -> LiveConnection in
            // While shutting down, the same answer the waiting connections got ("restarting").
            if let closing = state.closing { throw closing }
            guard state.perUser[user, default: 0] < settings.maxPerUser else { throw Self.tooManyChannels(settings.maxPerUser) }
            state.perUser[user, default: 0] += 1
            state.nextID += 1
            let id = state.nextID
            let lasts = kind == .stream ? settings.maxStreamDuration : wait
            let connection = LiveConnection(
                id: id, interest: interest, token: token, deadline: now + Self.nanoseconds(lasts), changesPending: changesPending)
            state.entries[id] = Entry(connection: connection, kind: kind, nextHeartbeat: now + Self.nanoseconds(settings.heartbeat))
            switch interest.principal.role {
            case .admin: state.everyone.insert(id)
            case .field: state.byUser[interest.principal.user, default: []].insert(id)
            case .coordinator: state.byTeam[interest.principal.team, default: []].insert(id)
            }
            return connection
        }
    }

    /// The connection ended (answered, closed by the client, or by the server).
    func close(_ connection: LiveConnection) {
        state.withLock { state in
            guard state.entries.removeValue(forKey: connection.id) != nil else { return }
            let principal = connection.interest.principal
            if let held = state.perUser[principal.user] { state.perUser[principal.user] = held > 1 ? held - 1 : nil }
            state.everyone.remove(connection.id)
            state.byUser[principal.user]?.remove(connection.id)
            if state.byUser[principal.user]?.isEmpty == true { state.byUser[principal.user] = nil }
            state.byTeam[principal.team]?.remove(connection.id)
            if state.byTeam[principal.team]?.isEmpty == true { state.byTeam[principal.team] = nil }
        }
    }

    /// Connections waiting now.
    var count: Int { state.withLock { $0.entries.count } }

    /// Live channels `user` holds now.
    func count(of user: String) -> Int { state.withLock { $0.perUser[user] ?? 0 } }

    /// A user's live channel past the cap: the device tries again later (a
    /// stream falls back to pulls meanwhile); one of its channels ends by then.
    static func tooManyChannels(_ cap: Int) -> APIError {
        APIError(
            .unavailable,
            "This account already holds \(cap) live connections (streams and long polls), the most one account may. "
                + "Your device tries again in a moment; close the app on a device you no longer use.",
            retryAfter: 30)
    }

    /// Who is connected now: each waiting connection's user and device (nil
    /// when its request did not say).
    var connectedDevices: [(user: String, device: String?)] {
        state.withLock { state in state.entries.values.map { ($0.connection.interest.principal.user, $0.connection.interest.device) } }
    }

    /// Connections waiting now, by kind.
    var counts: (longPolls: Int, streams: Int) {
        state.withLock { state in
            let streams = state.entries.values.filter { $0.kind == .stream }.count
            return (state.entries.count - streams, streams)
        }
    }

    /// A write committed: wakes the connections it may concern.
    func committed(_ notice: CommitNotice) {
        guard !notice.isEmpty else { return }
        onCommit.current?()
        // Pages read before this commit may lack it: none is shared from now on.
        pages.withLock { pages in
            pages.commits += 1
            pages.entries.removeAll(keepingCapacity: true)
        }
        let woken = state.withLock { state -> [LiveConnection] in
            if notice.wakesAll { return state.entries.values.map(\.connection) }
            var candidates = state.everyone
            for owner in notice.owners { candidates.formUnion(state.byUser[owner] ?? []) }
            for team in notice.teams { candidates.formUnion(state.byTeam[team] ?? []) }
            var found = candidates.compactMap { state.entries[$0]?.connection }
            // Reference data concerns everyone who follows it (rare: only admins write it).
            let referenceWritten = state.entries.values.first?.connection.interest.readOnly.intersection(notice.collections) ?? []
            if !referenceWritten.isEmpty { found = state.entries.values.map(\.connection) }
            return found.filter { $0.interest.isTouched(by: notice, referenceWritten: referenceWritten) }
        }
        for connection in woken { connection.signal { $0.changes = true } }
    }

    /// The page for `key` read since the last commit, or `read` now (and
    /// kept for the others), with its event: the streams that read it
    /// share its JSON and compressed bytes too. A page read while a commit
    /// landed is kept only if no commit was heard meanwhile; the commit's
    /// own wake-up makes its connections read again, so a page without it
    /// is never the last word.
    func sharedPage(_ key: String, read: () throws -> ChangesEvent) rethrows -> (event: ChangesEvent, shared: Bool) {
        let epoch = pages.withLock { pages -> UInt64 in pages.commits }
        let hit = pages.withLock { pages -> ChangesEvent? in
            guard pages.commits == epoch, let page = pages.entries[key] else { return nil }
            pages.hits += 1
            return page
        }
        if let hit { return (hit, true) }
        let page = try read()
        pages.withLock { pages in
            // A page short of held-back changes is read again soon; a later
            // read must not get the same short page from here.
            if pages.commits == epoch && !page.page.heldBack && pages.entries.count < 4096 { pages.entries[key] = page }
        }
        return (page, false)
    }

    /// A page came back short of changes held back by the feed's watermark
    /// (a transaction that may commit below them still runs): the
    /// connection reads again in a moment. The transaction it waits for may
    /// roll back, and then nothing would wake it.
    func recheck(_ connection: LiveConnection) {
        recheckQueue.asyncAfter(deadline: .now() + .milliseconds(5)) { connection.signal { $0.changes = true } }
    }

    private let recheckQueue = DispatchQueue(label: "outpost.live-hub.recheck")

    /// Ends every connection with `error` (a graceful shutdown says
    /// `unavailable` with Retry-After), and refuses new ones.
    func closeAll(with error: APIError) {
        let all = state.withLock { state -> [LiveConnection] in
            state.closing = error
            return state.entries.values.map(\.connection)
        }
        for connection in all { connection.signal { $0.closing = error } }
    }

    /// Ends the connections holding one of these tokens (hashes) with `error`.
    func close(tokens hashes: Set<String>, with error: APIError) {
        let matching = state.withLock { state in
            state.entries.values.map(\.connection).filter { $0.token.map { hashes.contains(SHA256.hex(of: $0.utf8)) } ?? false }
        }
        for connection in matching { connection.signal { $0.closing = error } }
    }

    /// Runs on every commit heard, before any connection is woken (the
    /// read replica's freshness mark).
    func setCommitHandler(_ handler: @escaping @Sendable () -> Void) {
        onCommit.withLock { $0 = handler }
    }

    private let onCommit = Locked<(@Sendable () -> Void)?>(nil)

    func setTickHandler(_ handler: @escaping @Sendable ([LiveConnection]) -> Void) {
        onTick.withLock { $0 = handler }
    }

    private func tick() {
        let now = Self.now()
        let (expired, heartbeats, all) = state.withLock { state -> ([LiveConnection], [LiveConnection], [LiveConnection]) in
            var expired: [LiveConnection] = []
            var heartbeats: [LiveConnection] = []
            for (id, entry) in state.entries {
                if now >= entry.connection.deadline { expired.append(entry.connection) }
                if entry.kind == .stream, now >= entry.nextHeartbeat {
                    heartbeats.append(entry.connection)
                    state.entries[id]?.nextHeartbeat = now + Self.nanoseconds(settings.heartbeat)
                }
            }
            return (expired, heartbeats, state.entries.isEmpty ? [] : state.entries.values.map(\.connection))
        }
        for connection in expired { connection.signal { $0.deadline = true } }
        for connection in heartbeats { connection.signal { $0.heartbeat = true } }
        if !all.isEmpty, let handler = onTick.current { handler(all) }
    }
}
