public import Foundation
public import OutpostCore

/// A record named by collection and uuid.
public struct RecordReference: Sendable, Hashable, CustomStringConvertible {
    /// The collection's name, e.g. `people`.
    public var collection: String
    /// The record's uuid, the same on the device and on the server.
    public var uuid: UUID

    /// A reference to the record `uuid` of `collection`.
    public init(collection: String, uuid: UUID) {
        self.collection = collection
        self.uuid = uuid
    }

    public var description: String { "\(collection)/\(uuid.wireText)" }

    /// Parses the `collection/uuid` form used in the outbox's `parents` column.
    init?(text: Substring) {
        guard let slash = text.firstIndex(of: "/"), let uuid = UUID.fromWire(String(text[text.index(after: slash)...]))
        else { return nil }
        self.init(collection: String(text[..<slash]), uuid: uuid)
    }
}

/// One change waiting in the outbox.
package struct OutboxEntry: Sendable, Equatable {
    /// Local order: entries are sent in the order they were made.
    package var entry: Int64
    package var mutationID: UUID
    package var record: RecordReference
    package var op: MutationOp
    /// The server version the change is conditioned on; nil = unconditional.
    package var baseVersion: Int64?
    /// Full fields (create) or patch (update) as stored, the JSON text of
    /// one object, and as sent: a push splices it into the request as it is.
    /// Nil for a delete.
    package var dataText: String?
    /// Records this one references; their creates must reach the server first.
    package var parents: [RecordReference]
    /// Fixed when the entry is first put into a push; nil = never sent.
    package var seq: Int64?
    /// Every send of this entry, whatever became of it.
    package var attempts: Int
    /// Failures that count against the retry budget (permanent ones only).
    package var failures: Int
    package var lastError: String?
    /// When the person made the change, by this device's clock: sent as
    /// `device_time`, shown beside the server's time of receipt.
    package var deviceTime: ServerTimestamp? = nil

    /// `dataText` as values, parsed on each use: only the rarer paths look
    /// inside a change (conflicts, attachments, a duplicate's comparison).
    /// The text was checked when the entry was read (`OutboxRow`).
    package var data: JSONObject? { dataText.flatMap { try? JSONObject.parseObject($0) } }

    /// Whether the server may hold this entry (it was put into a push at least once).
    package var wasSent: Bool { seq != nil }

    /// The wire form, for an entry that has its seq.
    func mutation() -> Mutation? {
        guard let seq else { return nil }
        return Mutation(
            seq: seq, id: mutationID, op: op, collection: record.collection, uuid: record.uuid,
            baseVersion: baseVersion, data: data, deviceTime: deviceTime)
    }

    /// Appends the wire form (`mutation()` written out) with the stored
    /// data text spliced in; nothing for an entry without a seq.
    func appendWire(to out: inout [UInt8]) {
        guard let seq else { return }
        Mutation.appendWire(
            seq: seq, id: mutationID, op: op, collection: record.collection, uuid: record.uuid, baseVersion: baseVersion,
            dataText: dataText, deviceTime: deviceTime, to: &out)
    }
}

/// A child held back because a parent's create was refused for good. It has
/// no seq yet, so it is released safely once the parent is fixed (docs/protocol.md, rule 1).
public struct HeldEntry: Sendable, Equatable {
    package var entry: OutboxEntry
    /// The parent whose create the server refused.
    public var refusedParent: RecordReference
    /// The record whose change waits.
    public var record: RecordReference { entry.record }
    /// The change that waits (`create`, `update`, `delete`).
    public var op: MutationOp { entry.op }

    package init(entry: OutboxEntry, refusedParent: RecordReference) {
        self.entry = entry
        self.refusedParent = refusedParent
    }
}

/// Counts of the outbox for the status line.
public struct OutboxSummary: Sendable, Equatable {
    /// Entries waiting to be sent (never sent, or sent without reaching the server).
    public var pending: Int
    /// Entries in the request this process is waiting on.
    public var sending: Int
    /// Entries sent before whose outcome is not known yet ("checking result").
    public var awaitingConfirmation: Int
    /// Children held because a parent was refused.
    public var held: Int
    /// Records whose last change the server refused.
    public var rejected: Int
    /// When the change at the head of the queue was made (the device's
    /// clock; its latest edit, when edits of one record were merged); nil
    /// when the outbox is empty. It grows old only when changes are not
    /// leaving the device.
    public var oldestChangeAt: Date? = nil

    /// Every change still in the outbox, whether waiting, sending or awaiting confirmation.
    public var total: Int { pending + sending + awaitingConfirmation }
}
