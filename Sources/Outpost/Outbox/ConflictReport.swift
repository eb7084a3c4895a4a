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
    /// The fields the edit and the server both changed, when the collection
    /// resolves conflicts by field (`merge_fields`); empty otherwise. Fields
    /// the edit set that are not named here were not changed on the server.
    public var fields: [String] = []
}
