import Foundation
import OutpostCore

extension SyncEngine {
    /// An OS path hint (also usable directly on platforms without a monitor).
    public func receive(_ hint: PathHint) async {
        let previous = connectivity.state
        let cameBack = connectivity.receive(hint)
        if connectivity.state != previous { await publishStatus() }
        if cameBack { reconnected(abandonCycle: true) }
    }

    /// Asks `GET /v1/health` whether the server answers: the probe used
    /// where the OS gives no path hints.
    @discardableResult
    public func checkConnectivity() async -> ConnectivityState {
        do {
            _ = try await health()
        } catch {}
        await publishStatus()
        return connectivity.state
    }

    /// The app came back to the foreground.
    public func enteredForeground() {
        isInForeground = true
        trigger(.foreground)
    }

    /// A request's outcome; a change of state is published at once, so a
    /// slow moment shows even when the next answer is fast again.
    func record(_ outcome: ConnectivityModel.Outcome) async {
        let previous = connectivity.state
        // At once, not in a task of its own: the channel this answer's
        // reconnection closes must be closed before anything opens another.
        if connectivity.record(outcome) { reconnected(abandonCycle: false) }
        if connectivity.state != previous { await publishStatus() }
    }

    func record(_ failure: ServerClient.Failure) async {
        switch failure.failure {
        case .offline: await record(.notSent)
        case .noAnswer, .timedOut: await record(.noAnswer)
        case .serverBusy: await record(.serverStruggling)
        default: await record(.answered(latency: failure.latency))
        }
    }

    /// After a real disconnection: a fresh session. Requests made before it
    /// are abandoned (their answers will be ignored), features refresh with
    /// jitter, and a sync starts with jitter too, so a thousand devices
    /// coming back at once do not call at once.
    func reconnected(abandonCycle: Bool) {
        emit(.freshSessionNeeded)
        // Stale reads are cancelled: the live channel reopens only after the
        // snapshot this reconnection's sync takes.
        stopLive()
        // Another network may not have the proxy that held streams back.
        liveChannel.networkChanged()
        if abandonCycle, schedule.abandonRunningCycle() {
            tasks.cycle?.cancel()
            tasks.cycle = nil
        }
        schedule.backoffEnded(resetFailures: true)
        for handler in refreshHandlers.values {
            spawn(after: jitter()) { _ in await handler() }
        }
        // The sync waits its own jitter; automatic triggers meanwhile wait with it.
        startRetryTimer(after: jitter(), resetFailures: true, trigger: .connectivityRegained)
    }

    func jitter() -> Duration {
        let window = options.reconnectJitter
        let nanoseconds = window.components.seconds * 1_000_000_000 + window.components.attoseconds / 1_000_000_000
        guard nanoseconds > 0 else { return .zero }
        return .nanoseconds(Int64.random(in: 0...nanoseconds, using: &random))
    }
}
