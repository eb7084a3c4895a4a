// The code of the article "Syncing in the background", type-checked for iOS.
// BackgroundTasks' schedulers exist on iOS only: elsewhere this file is empty.
#if canImport(BackgroundTasks) && os(iOS)
import BackgroundTasks
import Foundation
import Outpost

/// A background task handed to the Swift task that syncs. `@unchecked`:
/// BGTask predates Sendable; the work only completes it, and the system's
/// expiration handler only cancels that work.
struct SystemTask: @unchecked Sendable {
    let task: BGTask
}

/// The app's two background syncs: a short refresh every so often, and a
/// longer run when the system finds time (charging, on Wi-Fi, overnight).
final class BackgroundSync: Sendable {
    // Both identifiers are listed in Info.plist under BGTaskSchedulerPermittedIdentifiers.
    static let refresh = "com.example.fieldnotes.sync.refresh"
    static let processing = "com.example.fieldnotes.sync.processing"

    let engine: SyncEngine

    init(engine: SyncEngine) { self.engine = engine }

    /// Registers both tasks; called once, before the app finishes launching.
    func register() {
        BGTaskScheduler.shared.register(forTaskWithIdentifier: Self.refresh, using: nil) { task in
            // A refresh gets about 30 seconds: 25 for the sync, the rest to finish.
            self.sync(SystemTask(task: task), for: 25)
        }
        BGTaskScheduler.shared.register(forTaskWithIdentifier: Self.processing, using: nil) { task in
            // A processing run may last minutes; the expiration handler ends it sooner.
            self.sync(SystemTask(task: task), for: 10 * 60)
        }
    }

    /// Asks for the next runs: when the app leaves the screen, and at the
    /// start of every run (whatever the run leaves, the next one takes it).
    func schedule() {
        let refresh = BGAppRefreshTaskRequest(identifier: Self.refresh)
        refresh.earliestBeginDate = Date(timeIntervalSinceNow: 15 * 60)
        let processing = BGProcessingTaskRequest(identifier: Self.processing)
        processing.requiresNetworkConnectivity = true
        do {
            try BGTaskScheduler.shared.submit(refresh)
            try BGTaskScheduler.shared.submit(processing)
        } catch {
            // Background App Refresh is off, or too many requests wait:
            // the next foreground sync sends everything.
        }
    }

    /// The app left the screen: the live channel closes, the next runs are asked for.
    func appEnteredBackground() async {
        await engine.enteredBackground()
        schedule()
    }

    private func sync(_ handle: SystemTask, for seconds: TimeInterval) {
        schedule()
        let engine = self.engine
        let work = Task {
            let report = try? await engine.syncInBackground(until: Date(timeIntervalSinceNow: seconds))
            handle.task.setTaskCompleted(success: report?.isComplete ?? false)
        }
        // The system's time ran out first: cancelling cuts the sync cleanly,
        // at once, and the work above still completes the task.
        handle.task.expirationHandler = { work.cancel() }
    }
}
#endif
