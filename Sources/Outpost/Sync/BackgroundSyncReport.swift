/// What ``SyncEngine/syncInBackground(until:)-(Date)`` did in the time the
/// system gave, and what it left for the next sync.
///
/// A background task ends when the report says the work is done
/// (``isComplete``), or asks for another run when it is not:
///
/// ```swift
/// let report = try await engine.syncInBackground(until: .now + 25)
/// task.setTaskCompleted(success: report.isComplete)
/// if !report.isComplete { scheduleNextRefresh() }
/// ```
public struct BackgroundSyncReport: Sendable, Equatable {
    /// Changes the server confirmed in this run.
    public var changesPushed = 0
    /// Changes still in the outbox afterwards: waiting, being sent, or
    /// sent without an answer (``changesInDoubt``).
    public var changesUnsent = 0
    /// Of the changes still unsent, those sent whose answer never came
    /// ("checking result"): the next sync resends them and the server
    /// applies each once.
    public var changesInDoubt = 0
    /// Attachments whose upload completed in this run.
    public var attachmentsUploaded = 0
    /// Attachment bytes sent in this run (resent bytes included).
    public var attachmentBytesSent: Int64 = 0
    /// Attachments still to upload afterwards (partly uploaded ones included;
    /// they resume from the bytes the server holds).
    public var attachmentsLeft = 0
    /// Bytes of those attachments the server does not hold yet.
    public var attachmentBytesLeft: Int64 = 0
    /// Records the pull received and stored.
    public var recordsReceived = 0
    /// A pull got to the end of the server's changes in this run.
    public var pullFinished = false
    /// The deadline (or the calling task's cancellation) cut the run short.
    public var deadlineReached = false
    /// Why the last cycle of the run stopped early, other than the deadline.
    public var failure: SyncFailure?

    /// An empty report: nothing done, nothing known to be left.
    public init() {}

    /// Nothing left: every change confirmed, every attachment uploaded, the
    /// pull finished, within the deadline and without a failure.
    public var isComplete: Bool {
        !deadlineReached && failure == nil && pullFinished && changesUnsent == 0 && attachmentsLeft == 0
    }

    /// Adds what one cycle of the run did.
    mutating func add(_ cycle: SyncReport) {
        changesPushed += cycle.confirmed
        attachmentsUploaded += cycle.attachmentsUploaded
        attachmentBytesSent += cycle.attachmentBytesSent
        recordsReceived += cycle.received
    }

    /// Takes what is left from the outbox and the attachments as they stand after the run.
    mutating func left(outbox: OutboxSummary, attachments: AttachmentSummary) {
        changesUnsent = outbox.total
        changesInDoubt = outbox.awaitingConfirmation
        attachmentsLeft = attachments.waiting
        attachmentBytesLeft = attachments.bytesWaiting
    }
}

/// A background sync that could not start.
public enum BackgroundSyncError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The deadline had already passed (by this much) when the call came:
    /// nothing was sent and nothing changed.
    case deadlinePassed(by: Duration)

    public var description: String {
        switch self {
        case .deadlinePassed(let late):
            return "The background sync's deadline had passed \(late) before the call: nothing was done."
        }
    }
}
