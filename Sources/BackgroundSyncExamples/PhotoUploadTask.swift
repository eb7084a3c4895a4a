// The code of the article "Syncing in the background", type-checked for iOS.
#if canImport(BackgroundTasks) && os(iOS)
import BackgroundTasks
import Foundation
import Outpost

/// Sending the photos the person just asked to send, with the system's
/// progress display, even when they leave the app (iOS 26).
@available(iOS 26.0, *)
final class PhotoUploadTask: Sendable {
    // Info.plist's BGTaskSchedulerPermittedIdentifiers lists "com.example.fieldnotes.upload.*".
    static let prefix = "com.example.fieldnotes.upload"

    let engine: SyncEngine

    init(engine: SyncEngine) { self.engine = engine }

    /// Registers the handler; called once, before the app finishes launching.
    func register() {
        BGTaskScheduler.shared.register(forTaskWithIdentifier: "\(Self.prefix).*", using: nil) { task in
            guard let task = task as? BGContinuedProcessingTask else { return }
            self.upload(SystemTask(task: task))
        }
    }

    /// The person tapped "Send": the upload starts now and goes on in the background.
    func start() throws {
        let request = BGContinuedProcessingTaskRequest(
            identifier: "\(Self.prefix).\(UUID().uuidString)", title: "Sending photos", subtitle: "Starting")
        // Run now or not at all: a queued "Send" would surprise the person later.
        request.strategy = .fail
        try BGTaskScheduler.shared.submit(request)
    }

    private func upload(_ handle: SystemTask) {
        let engine = self.engine
        let work = Task {
            let progress = Task { await Self.showProgress(of: engine, on: handle) }
            // The person started it: the system lets it run while it shows
            // progress, and stops it (the expiration handler) when it must.
            let report = try? await engine.syncInBackground(until: Date(timeIntervalSinceNow: 60 * 60))
            progress.cancel()
            handle.task.setTaskCompleted(success: report?.isComplete ?? false)
        }
        handle.task.expirationHandler = { work.cancel() }
    }

    /// Turns the engine's attachment figures into the task's progress: bytes
    /// the server holds out of those that waited when the upload began.
    private static func showProgress(of engine: SyncEngine, on handle: SystemTask) async {
        guard let task = handle.task as? BGContinuedProcessingTask else { return }
        var total: Int64?
        for await status in await engine.statusUpdates() {
            let waiting = status.attachments.bytesWaiting
            let all = max(total ?? waiting, waiting)
            total = all
            task.progress.totalUnitCount = all
            task.progress.completedUnitCount = all - waiting
            let files = status.attachments.waiting
            task.updateTitle("Sending photos", subtitle: files == 1 ? "1 photo left" : "\(files) photos left")
        }
    }
}
#endif
