public import Foundation
import OutpostCore

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
    package var confirmed: [RecordReference] = []
    /// Of those, the ones the server had already processed (a retry).
    package var duplicates: Int = 0
    package var conflicts: [ConflictReport] = []
    package var rejected: [RejectedChange] = []
    /// Entries of the batch without a result; they keep their seq and go again.
    package var unanswered: [Int64] = []
    /// Records confirmed by a `duplicate`: they took the record as the first
    /// processing left it, which may be older than the server's now (and a
    /// pull meanwhile skipped the newer copy while the change was waiting).
    package var adoptedOriginals: [RecordReference] = []
    /// Changes answered `missing_attachment` whose attachments are queued to
    /// upload again: each goes again, as a new mutation, after its upload.
    package var reuploading: [RecordReference] = []
}
