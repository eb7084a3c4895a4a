import Foundation
import OutpostCore

extension SyncEngine {
    /// The current status.
    public var currentStatus: SyncStatus { status }

    /// The status now, then after every change (coalesced to the newest).
    public func statusUpdates() -> AsyncStream<SyncStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: SyncStatus.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        statusContinuations[id] = continuation
        continuation.yield(status)
        continuation.onTermination = { [weak self] _ in
            Task { await self?.removeStatusListener(id) }
        }
        return stream
    }

    private func removeStatusListener(_ id: UUID) { statusContinuations.removeValue(forKey: id) }

    /// Recomputes the status from the store and the engine, and sends it if it changed.
    func publishStatus() async {
        var next = status
        next.connectivity = connectivity.state
        next.progress = status.isSyncing ? progress : nil
        if let summary = try? await store.outboxSummary() {
            next.pending = summary.pending
            next.sending = summary.sending
            next.awaitingConfirmation = summary.awaitingConfirmation
            next.rejected = summary.rejected
            next.held = summary.held
        }
        next.conflicts = (try? await store.conflicts().count) ?? next.conflicts
        if let state = try? await store.pullState(collections: store.syncedCollections) {
            next.lastSyncedAt = state.lastSyncedAt
            next.hasSynced = !state.lastSyncedAt.isEmpty
        }
        if let counts = try? await store.localCounts() {
            let mode = (try? await store.metadata("scope.mode")).flatMap { $0.flatMap(ScopeMode.init(rawValue:)) }
            let window = (try? await store.metadata("scope.window_start")).flatMap { $0.map(ServerTimestamp.init(rawValue:)) }
            var coverage: [String: CollectionCoverage] = [:]
            for (collection, count) in counts {
                let readOnly = collection == "catalogs"
                let collectionMode: ScopeMode = readOnly ? .full : (mode ?? .full)
                coverage[collection] = CollectionCoverage(
                    mode: collectionMode, onDevice: count, inScope: scopeTotals[collection],
                    windowStart: collectionMode == .capped ? window : nil)
            }
            next.coverage = coverage
        }
        guard next != status || statusContinuations.isEmpty == false else { return }
        let changed = next != status
        status = next
        if changed {
            for continuation in statusContinuations.values { continuation.yield(next) }
        }
    }
}
