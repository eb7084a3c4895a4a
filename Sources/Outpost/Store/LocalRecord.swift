public import Foundation
public import OutpostCore

/// Where a local record stands with the server.
public enum SyncState: String, Sendable, Codable, CaseIterable {
    /// The server holds exactly what the device shows.
    case synced
    /// Local changes wait to be sent (or to be confirmed after an unknown outcome).
    case pending
    /// A request carrying this record's change is on its way now.
    case sending
    /// The server refused the last change for good; see ``LocalRecord/rejection``.
    case rejected
}

/// Why the server refused a change: the code and each field's problem.
public struct Rejection: Sendable, Equatable, Codable {
    /// The server's code for the refusal (e.g. `invalid_field`), or the device's own `retry_budget_spent`.
    public var code: String
    /// Each field at fault, with what is wrong with it, to show beside the field.
    public var errors: [String: String]
    /// The refused operation (`create`, `update`, `delete`).
    public var op: MutationOp
    /// The server's sentence when it refused the whole request this change
    /// was in (and it alone was at fault), the database's own words when a
    /// table of the app's refused it (`constraint_violation`), or why the
    /// device stopped sending it.
    public var message: String?

    /// A rejection made from its code, field errors, refused operation and optional message.
    public init(code: String, errors: [String: String], op: MutationOp, message: String? = nil) {
        self.code = code
        self.errors = errors
        self.op = op
        self.message = message
    }
}

/// A record as the device holds it: the fields plus sync metadata.
public struct LocalRecord<Value: Sendable>: Sendable {
    /// The collection the record belongs to.
    public var collection: String
    /// The record's identity, made on the device and kept by the server.
    public var uuid: UUID
    /// The record's fields: a `SyncRecord` value or a JSON object.
    public var value: Value
    /// Where the record stands with the server.
    public var syncState: SyncState
    /// The server's integer id, nil until the first upload is confirmed.
    public var serverID: Int64?
    /// The server version the device last saw.
    public var serverVersion: Int64?
    /// When the server last wrote the record, as the server wrote it.
    public var serverUpdatedAt: ServerTimestamp?
    /// When this device last edited the record (device clock, display only).
    public var localUpdatedAt: Date?
    /// "Captured on the phone at": when the last write was made, by the
    /// clock of the device that made it (this one's for a local edit). Shown
    /// beside ``serverUpdatedAt`` ("received by the server at"); never
    /// used for ordering, since a phone's clock may be wrong.
    public var deviceTime: Date?
    /// Why the server refused the last change, while the record is `rejected`; nil otherwise.
    public var rejection: Rejection?
    /// The user who created the record, as the server set it; nil until the server's copy reaches the device.
    public var owner: String?
    /// The owner's team, as the server set it; nil until the server's copy reaches the device.
    public var team: String?

    /// "You edited this 10 minutes ago and it is not sent yet": the local edit
    /// is newer than anything the server confirmed.
    public var hasUnsentChanges: Bool { syncState == .pending || syncState == .sending }
}

extension LocalRecord: Equatable where Value: Equatable {}

/// An untyped record: its fields as a JSON object.
public typealias JSONRecord = LocalRecord<JSONObject>

/// A record is identified by its uuid, made on the device and kept by the
/// server: `List(people) { … }` and `ForEach` need nothing more.
extension LocalRecord: Identifiable {
    public var id: UUID { uuid }
}
