import Foundation
import OutpostCore

extension SyncEngine {
    /// The current status.
    public var currentStatus: SyncStatus { status }

    /// The status now, then after every change (coalesced to the newest).
    public func statusUpdates() -> AsyncStream<SyncStatus> {
        statusUpdates(keeping: 1)
    }

    /// The status now, then after every change, with up to `newest`
    /// changes kept for a slow reader: tests see every step the status
    /// took, not only where it settled.
    package func statusUpdates(keeping newest: Int) -> AsyncStream<SyncStatus> {
        let (stream, continuation) = statusListeners.add(newest: newest, ended: listenerEnded)
        continuation.yield(status)
        return stream
    }

    /// Sends the download progress alone, without reading the store.
    func publishProgress() {
        var next = status
        next.progress = status.isSyncing ? progress : nil
        next.connectivity = connectivity.state
        guard next != status else { return }
        status = next
        statusListeners.yield(next)
    }

    /// Turns the syncing flag and sends the status at once, without reading
    /// the store. Set on `status` and left to `publishStatus`, the turn was
    /// sent only when a figure of the store moved as well: a cycle with
    /// nothing to send or receive never showed itself. (Not reading the
    /// store also keeps a cycle's first push from waiting on it; the first
    /// `publishStatus` of the cycle brings the figures.)
    func showSyncing(_ syncing: Bool) {
        guard status.isSyncing != syncing else { return }
        status.isSyncing = syncing
        status.progress = syncing ? progress : nil
        status.connectivity = connectivity.state
        statusListeners.yield(status)
    }

    /// Recomputes the status from the store and the engine, and sends it if it changed.
    ///
    /// Everything read from the store is gathered first; the engine's own
    /// fields are read only after the last suspension, so a change made
    /// meanwhile (a new token, a finished cycle) is never overwritten.
    func publishStatus() async {
        let epoch = statusEpoch
        let summary = try? await store.outboxSummary()
        let conflicts = try? await store.conflicts().count
        let pullState = try? await store.pullState(collections: store.syncedCollections)
        let counts = try? await store.localCounts()
        let attachments = try? await store.attachmentSummary()
        let mode = (try? await store.metadata("scope.mode")).flatMap { $0.flatMap(ScopeMode.init(rawValue:)) }
        let window = (try? await store.metadata("scope.window_start")).flatMap { $0.map(ServerTimestamp.init(rawValue:)) }

        // Read before a wipe: the store's figures are the last person's.
        guard epoch == statusEpoch else { return }
        var next = status
        next.connectivity = connectivity.state
        next.progress = status.isSyncing ? progress : nil
        if let summary {
            next.pending = summary.pending
            next.sending = summary.sending
            next.awaitingConfirmation = summary.awaitingConfirmation
            next.rejected = summary.rejected
            next.held = summary.held
        }
        if let conflicts { next.conflicts = conflicts }
        if let attachments { next.attachments = attachments }
        if let pullState {
            next.lastSyncedAt = pullState.lastSyncedAt
            next.hasSynced = !pullState.lastSyncedAt.isEmpty
        }
        if let counts {
            var coverage: [String: CollectionCoverage] = [:]
            for (collection, count) in counts {
                let collectionMode: ScopeMode = collection == "catalogs" ? .full : (mode ?? .full)
                coverage[collection] = CollectionCoverage(
                    mode: collectionMode, onDevice: count, inScope: scopeTotals[collection],
                    windowStart: collectionMode == .capped ? window : nil)
            }
            next.coverage = coverage
        }
        guard next != status else { return }
        status = next
        statusListeners.yield(next)
    }
}
