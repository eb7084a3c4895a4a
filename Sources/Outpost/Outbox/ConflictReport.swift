public import Foundation
public import OutpostCore

/// An edit that lost to a newer server copy.
///
/// The server copy prevailed on the device; the edit that lost is kept here
/// so the app can show it and offer to apply it again.
public struct ConflictReport: Sendable, Equatable, Identifiable {
    public var id: Int64
    /// The record the losing edit was made to.
    public var record: RecordReference
    /// The id of the queued change that lost.
    public var mutationID: UUID
    /// What the device tried to do.
    public var op: MutationOp
    /// The fields the person set (a create's fields or an update's patch);
    /// nil for a delete.
    public var localChange: JSONObject?
    /// The copy that prevailed; nil when the record is gone from the server
    /// (deleted by someone else, or no longer in the person's scope).
    public var serverRecord: WireRecord?
    /// Device time the conflict was learnt, for display.
    public var detectedAt: Date?
}

/// A change the server refused for good, as the settlement of a push reports it.
public struct RejectedChange: Sendable, Equatable {
    /// The record whose change was refused.
    public var record: RecordReference
    /// The id of the refused change.
    public var mutationID: UUID
    /// Why the server refused it: the code and each field's problem.
    public var rejection: Rejection
}

/// What one push's results did to the store.
package struct PushSettlement: Sendable, Equatable {
    /// Entries the server holds now (`applied`, or `duplicate` of one it applied).
    public var confirmed: [RecordReference] = []
    /// Of those, the ones the server had already processed (a retry).
    public var duplicates: Int = 0
    public var conflicts: [ConflictReport] = []
    public var rejected: [RejectedChange] = []
    /// Entries of the batch without a result; they keep their seq and go again.
    public var unanswered: [Int64] = []
    /// Records confirmed by a `duplicate`: they took the record as the first
    /// processing left it, which may be older than the server's now (and a
    /// pull meanwhile skipped the newer copy while the change was waiting).
    package var adoptedOriginals: [RecordReference] = []
}
