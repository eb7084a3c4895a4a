package import Foundation
import OutpostCore

/// The one writer of the engine's ``SyncStatus``. Every other part sends
/// it an event; it decides what the status becomes and whether listeners
/// see it now or with the next publication.
package struct StatusPublisher {
    /// What listeners saw last, plus changes noted since.
    package private(set) var status = SyncStatus()
    /// The download's progress; the status shows it while a cycle runs.
    package private(set) var progress: SyncProgress?
    /// Bumped when the store is wiped: figures read before then are the last person's.
    package private(set) var epoch = 0
    /// A refresh after live pages is on its way (at most one at a time).
    package private(set) var refreshPending = false
    /// When a live page, or the refresh after pages, last read the figures (the engine's clock).
    private var liveFiguresReadAt: Duration?
    /// A live page was stored since the figures were last read: the refresh
    /// after pages reads them; otherwise a later page already did.
    private var liveFiguresStale = false
    private var listeners = Listeners<SyncStatus>()

    package init(signInRequired: Bool = false) {
        status.signInRequired = signInRequired
    }

    /// What happened, as far as the status is concerned.
    package enum Event {
        // Shown at once.
        /// A cycle began or ended (the store is not read: a cycle with
        /// nothing to send or receive still shows itself).
        case syncing(Bool, connectivity: ConnectivityState)
        /// The download's progress moved; only it is shown.
        case progressShown(connectivity: ConnectivityState)
        /// The live channel's state, and the server time of its last event.
        case live(LiveChannelState, eventAt: ServerTimestamp?)
        /// The attachments' figures alone, after an upload.
        case attachments(AttachmentSummary)
        /// Figures read from the store at `epoch`, with the engine's own.
        case figures(StoreFigures, epoch: Int, connectivity: ConnectivityState, scopeTotals: [String: Int64])

        // Noted: listeners see them with the next publication.
        case signInRequired(Bool)
        /// The last failure (a failed sign-in, a local fault).
        case failed(SyncFailure)
        /// A cycle failed: the failure, and what it says about the session.
        case cycleFailed(SyncFailure)
        /// A cycle got through: no error, no update required.
        case cycleSucceeded
        /// A new token: the session's failures are over.
        case tokenReplaced
        case uploadingAttachments(Bool)
        /// A first download starts with this many rows.
        case downloadStarted(total: Int64)
        /// Rows of the download were stored.
        case downloaded(rows: Int64)
        /// The download reached its end.
        case downloadFinished
        /// The cycle is over: no progress to show.
        case downloadEnded
        /// The engine stopped: no channel.
        case stopped
        /// The store was wiped: nothing said about the last person's data stays.
        case wiped
    }

    /// Applies `event`; returns true when listeners were sent the new status.
    @discardableResult
    package mutating func send(_ event: Event) -> Bool {
        var next = status
        switch event {
        case .syncing(let syncing, let connectivity):
            guard status.isSyncing != syncing else { return false }
            next.isSyncing = syncing
            next.progress = syncing ? progress : nil
            next.connectivity = connectivity
        case .progressShown(let connectivity):
            next.progress = status.isSyncing ? progress : nil
            next.connectivity = connectivity
        case .live(let state, let eventAt):
            next.live = state
            if let eventAt { next.lastLiveEventAt = eventAt }
        case .attachments(let summary):
            next.attachments = summary
        case .figures(let figures, let readIn, let connectivity, let scopeTotals):
            // Read before a wipe: the store's figures are the last person's.
            guard readIn == epoch else { return false }
            next.connectivity = connectivity
            next.progress = status.isSyncing ? progress : nil
            figures.apply(to: &next, scopeTotals: scopeTotals)
        case .signInRequired, .failed, .cycleFailed, .cycleSucceeded, .tokenReplaced, .uploadingAttachments,
            .downloadStarted, .downloaded, .downloadFinished, .downloadEnded, .stopped, .wiped:
            note(event)
            return false
        }
        guard next != status else { return false }
        status = next
        listeners.yield(next)
        return true
    }

    private mutating func note(_ event: Event) {
        switch event {
        case .signInRequired(let required):
            status.signInRequired = required
        case .failed(let failure):
            status.lastError = failure
        case .cycleFailed(let failure):
            status.lastError = failure
            if failure == .signInRequired { status.signInRequired = true }
            if failure == .updateRequired { status.updateRequired = true }
        case .cycleSucceeded:
            status.lastError = nil
            status.updateRequired = false
        case .tokenReplaced:
            status.signInRequired = false
            if status.lastError == .signInRequired || status.lastError == .accessRevoked { status.lastError = nil }
        case .uploadingAttachments(let uploading):
            status.isUploadingAttachments = uploading
        case .downloadStarted(let total):
            progress = SyncProgress(done: 0, total: total)
        case .downloaded(let rows):
            if var current = progress {
                current.done = min(current.total, current.done + rows)
                progress = current
            }
        case .downloadFinished:
            if var current = progress {
                current.done = current.total
                progress = current
            }
        case .downloadEnded:
            progress = nil
        case .stopped:
            status.live = .off
        case .wiped:
            epoch += 1
            let connectivity = status.connectivity
            status = SyncStatus()
            status.connectivity = connectivity
            progress = nil
        case .syncing, .progressShown, .live, .attachments, .figures:
            break
        }
    }

    // MARK: Listeners

    /// A stream that starts with the status now, then every publication,
    /// with up to `newest` kept for a slow reader.
    package mutating func subscribe(keeping newest: Int, ended: @escaping @Sendable (UUID) -> Void) -> AsyncStream<SyncStatus> {
        let (stream, continuation) = listeners.add(newest: newest, ended: ended)
        continuation.yield(status)
        return stream
    }

    mutating func unsubscribe(_ id: UUID) { listeners.remove(id) }

    /// Ends every stream (the engine stopped).
    mutating func finishListeners() { listeners.finishAll() }

    // MARK: Refreshes after live pages

    /// Asks for a refresh of the store's figures; true when one must be
    /// scheduled (none is on its way already).
    package mutating func refreshWanted() -> Bool {
        guard !refreshPending else { return false }
        refreshPending = true
        return true
    }

    /// The scheduled refresh runs at `now` (a later page asks for another);
    /// true when it must read the figures: a page stored since they were
    /// last read left them behind. A page that read them in its own call
    /// after it makes the refresh needless.
    package mutating func refreshStarted(now: Duration) -> Bool {
        refreshPending = false
        guard liveFiguresStale else { return false }
        liveFiguresStale = false
        liveFiguresReadAt = now
        return true
    }

    /// Whether a live page stored at `now` reads the figures it moves in
    /// the same call on the store: at most once in 200 ms, the refresh
    /// after pages included (a busy team's pages would recount the tables
    /// at every one); the pages between leave it to one refresh after them
    /// (``refreshWanted()``).
    package mutating func liveFiguresDue(now: Duration) -> Bool {
        if let last = liveFiguresReadAt, now - last < .milliseconds(200), now >= last {
            liveFiguresStale = true
            return false
        }
        liveFiguresReadAt = now
        liveFiguresStale = false
        return true
    }
}

/// The status's figures that come from the store, read in one go.
package struct StoreFigures: Sendable {
    package var outbox: OutboxSummary?
    package var conflicts: Int?
    package var pullState: PullState?
    package var counts: [String: Int]?
    package var attachments: AttachmentSummary?
    package var mode: ScopeMode?
    package var windowStart: ServerTimestamp?

    package init(
        outbox: OutboxSummary? = nil, conflicts: Int? = nil, pullState: PullState? = nil, counts: [String: Int]? = nil,
        attachments: AttachmentSummary? = nil, mode: ScopeMode? = nil, windowStart: ServerTimestamp? = nil
    ) {
        self.outbox = outbox
        self.conflicts = conflicts
        self.pullState = pullState
        self.counts = counts
        self.attachments = attachments
        self.mode = mode
        self.windowStart = windowStart
    }

    /// Reads every figure in one call on the store; one the store cannot
    /// give is left as it was.
    static func read(from store: LocalStore) async -> StoreFigures {
        await store.statusFigures()
    }

    /// Writes the figures read into `status`; catalogs are always kept whole.
    func apply(to status: inout SyncStatus, scopeTotals: [String: Int64]) {
        if let outbox {
            status.pending = outbox.pending
            status.sending = outbox.sending
            status.awaitingConfirmation = outbox.awaitingConfirmation
            status.oldestUnsentAt = outbox.oldestChangeAt
            status.rejected = outbox.rejected
            status.held = outbox.held
        }
        if let conflicts { status.conflicts = conflicts }
        if let attachments { status.attachments = attachments }
        if let pullState {
            status.lastSyncedAt = pullState.lastSyncedAt
            status.hasSynced = !pullState.lastSyncedAt.isEmpty
        }
        if let counts {
            var coverage: [String: CollectionCoverage] = [:]
            for (collection, count) in counts {
                let collectionMode: ScopeMode = collection == "catalogs" ? .full : (mode ?? .full)
                coverage[collection] = CollectionCoverage(
                    mode: collectionMode, onDevice: count, inScope: scopeTotals[collection],
                    windowStart: collectionMode == .capped ? windowStart : nil)
            }
            status.coverage = coverage
        }
    }
}

extension LocalStore {
    /// The status's figures, read in one go on the store's queue: they are
    /// read again after live pages, and a call per figure was seven hops
    /// onto the queue and back (fourteen thread wake-ups).
    package func statusFigures() -> StoreFigures {
        readingAtOnce {
            var figures = pageFigures()
            figures.outbox = try? outboxSummary()
            figures.conflicts = try? conflicts().count
            figures.attachments = try? attachmentSummary()
            return figures
        }
    }

    /// Only the figures a live page moves (its cursor and times, the
    /// counts, the scope), for the refresh after pages: the outbox, the
    /// conflicts and the attachments are not a live page's to move (a page
    /// that queues a change starts a cycle, which reads them).
    package func livePageFigures() -> StoreFigures {
        readingAtOnce { pageFigures() }
    }

    /// `read` in one read transaction: SQLite takes its file locks once for
    /// all the reads, not once per statement (four `fcntl` calls a round).
    private func readingAtOnce(_ read: () -> StoreFigures) -> StoreFigures {
        let reading = !isClosed && !connection.isInTransaction && (try? connection.run("BEGIN")) != nil
        defer { if reading && connection.isInTransaction { _ = try? connection.run("COMMIT") } }
        return read()
    }
}
