import Foundation
import OutpostCore

extension SyncEngine {
    /// The current status.
    public var currentStatus: SyncStatus { status }

    /// The status as the publisher holds it (read-only: changes are events sent to it).
    var status: SyncStatus { statusPublisher.status }

    /// The status now, then after every change (coalesced to the newest).
    public func statusUpdates() -> AsyncStream<SyncStatus> {
        statusUpdates(keeping: 1)
    }

    /// The status now, then after every change, with up to `newest`
    /// changes kept for a slow reader: tests see every step the status
    /// took, not only where it settled.
    package func statusUpdates(keeping newest: Int) -> AsyncStream<SyncStatus> {
        statusPublisher.subscribe(keeping: newest, ended: listenerEnded)
    }

    /// Sends the download progress alone, without reading the store.
    func publishProgress() {
        statusPublisher.send(.progressShown(connectivity: connectivity.state))
    }

    /// Turns the syncing flag and sends the status at once, without reading
    /// the store. Left to `publishStatus`, the turn was sent only when a
    /// figure of the store moved as well: a cycle with nothing to send or
    /// receive never showed itself. (Not reading the store also keeps a
    /// cycle's first push from waiting on it.)
    func showSyncing(_ syncing: Bool) {
        statusPublisher.send(.syncing(syncing, connectivity: connectivity.state))
    }

    /// Recomputes the status from the store and the engine, and sends it if it changed.
    ///
    /// Everything read from the store is gathered first; the engine's own
    /// fields are read only after the last suspension, so a change made
    /// meanwhile (a new token, a finished cycle) is never overwritten.
    func publishStatus() async {
        let epoch = statusPublisher.epoch
        let figures = await StoreFigures.read(from: store)
        statusPublisher.send(
            .figures(figures, epoch: epoch, connectivity: connectivity.state, scopeTotals: scopeTotals))
    }

    /// The status's store figures (counts, last sync) after live pages, at
    /// most five times a second: a busy team's commits would otherwise
    /// recount the device's tables after every one.
    func refreshStatusSoon() {
        guard statusPublisher.refreshWanted() else { return }
        spawn { engine in
            try? await Task.sleep(for: .milliseconds(200))
            await engine.refreshStatusNow()
        }
    }

    /// Reads only what live pages move, and only when no page read it in
    /// its own call since the last of them.
    private func refreshStatusNow() async {
        guard statusPublisher.refreshStarted(now: clock.now()) else { return }
        let epoch = statusPublisher.epoch
        let figures = await store.livePageFigures()
        statusPublisher.send(.figures(figures, epoch: epoch, connectivity: connectivity.state, scopeTotals: scopeTotals))
    }
}
