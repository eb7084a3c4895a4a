public import Foundation
import OutpostCore

/// What one sync cycle did: the summary a person sees after pull-to-refresh.
public struct SyncReport: Sendable, Equatable {
    /// What started this cycle.
    public var trigger: SyncTrigger
    /// Changes sent (resends included).
    public var sent = 0
    /// Changes the server now holds.
    public var confirmed = 0
    /// Of those, ones the server had already applied (a lost answer).
    public var duplicates = 0
    /// Edits that lost to a newer server copy in this cycle, kept so the app can show them.
    public var conflicts: [ConflictReport] = []
    /// Changes the server refused for good in this cycle, with their field errors.
    public var rejected: [RejectedChange] = []
    /// Children held because a parent was refused.
    public var held: [HeldEntry] = []
    /// Records received and stored.
    public var received = 0
    /// Records deleted or removed by the pull.
    public var deleted = 0
    /// Server copies not applied because local changes are waiting.
    public var keptLocal = 0
    /// Attachments whose upload completed in this cycle.
    public var attachmentsUploaded = 0
    /// Attachment bytes sent in this cycle (resent bytes included).
    public var attachmentBytesSent: Int64 = 0
    /// Changes the server answered `missing_attachment`: their attachments
    /// are uploaded again and the changes resent.
    public var reuploads = 0
    /// Why the cycle stopped early, if it did.
    public var failure: SyncFailure?

    /// Creates an empty report for a cycle started by `trigger`.
    public init(trigger: SyncTrigger) { self.trigger = trigger }

    mutating func add(_ settlement: PushSettlement) {
        confirmed += settlement.confirmed.count
        duplicates += settlement.duplicates
        conflicts += settlement.conflicts
        rejected += settlement.rejected
        reuploads += settlement.reuploading.count
    }

    mutating func add(_ page: PullPageResult) {
        received += page.applied
        deleted += page.deleted + page.removed
        keptLocal += page.keptLocal
    }

    /// Counts in what the server settled in an earlier cycle of the same
    /// sync before that cycle stopped (a caller that tries again after a
    /// busy server reports the whole: a change confirmed before a later
    /// step met the busy server is not sent again, and would otherwise go
    /// unsaid). Only settled changes count as sent: a send the busy server
    /// refused is sent again and counted then. What is held is this cycle's:
    /// it is the state now.
    package mutating func include(_ earlier: SyncReport) {
        sent += earlier.confirmed + earlier.conflicts.count + earlier.rejected.count
        confirmed += earlier.confirmed
        duplicates += earlier.duplicates
        conflicts = earlier.conflicts + conflicts
        rejected = earlier.rejected + rejected
        attachmentsUploaded += earlier.attachmentsUploaded
        attachmentBytesSent += earlier.attachmentBytesSent
        reuploads += earlier.reuploads
    }
}

/// Things the app should react to, one at a time.
public enum SyncEvent: Sendable, Equatable {
    /// The network came back after a real disconnection: registered
    /// refreshes run now, each after its own jittered delay.
    case freshSessionNeeded
    /// The session expired: ask the person to sign in; capture goes on.
    case signInRequired
    /// The device's access was withdrawn.
    case accessRevoked
    /// Edits that lost to a newer server copy.
    case conflicts([ConflictReport])
    /// Changes refused for good, with their field errors.
    case rejected([RejectedChange])
    /// A cycle ended.
    case cycleCompleted(SyncReport)
    /// Changes the live channel just stored, in commit order.
    case received([ReceivedChange])
}

/// One change the live channel stored: what `outpost watch` prints.
public struct ReceivedChange: Sendable, Equatable {
    /// The record's collection.
    public var collection: String
    /// The record's uuid.
    public var uuid: UUID
    /// A tombstone: the record was deleted.
    public var deleted: Bool
    /// The record left this person's scope (reassigned); the local copy is gone.
    public var removed: Bool
    /// The record's fields as the server holds them now; nil when deleted or removed.
    public var data: JSONObject?
    /// When the server stored it.
    public var serverUpdatedAt: ServerTimestamp?

    /// A change as the live channel stored it.
    public init(
        collection: String, uuid: UUID, deleted: Bool, removed: Bool, data: JSONObject?, serverUpdatedAt: ServerTimestamp?
    ) {
        self.collection = collection
        self.uuid = uuid
        self.deleted = deleted
        self.removed = removed
        self.data = data
        self.serverUpdatedAt = serverUpdatedAt
    }

    /// The changes of a page, read from its text.
    static func all(in page: RawPullPage) -> [ReceivedChange] {
        page.changes.compactMap { change -> ReceivedChange? in
            guard let uuid = UUID.fromWire(page.string(change.uuid)) else { return nil }
            let data = change.data.flatMap { try? JSONObject.parseObject(page.string($0)) }
            let updated = change.removed ? nil : ServerTimestamp(rawValue: page.string(change.updatedAt))
            return ReceivedChange(
                collection: change.collection, uuid: uuid, deleted: change.deleted, removed: change.removed, data: data,
                serverUpdatedAt: updated)
        }
    }
}
