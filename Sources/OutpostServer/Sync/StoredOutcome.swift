import Foundation
import OutpostCore

/// A push result as `mutation_results` keeps it, for a retry's `duplicate`
/// answer and `GET /v1/mutations/{id}`.
///
/// Kept slim: the outcome (status, refusal details) and the version of the
/// record it names, not the record: that version is still in `records`, or
/// in `record_history` once the record changed again, so a copy in every
/// result doubled what the server stored per change. Results written before
/// the slimming step, or whose record has no history (an app's own table),
/// keep the full wire result, and read the same way.
struct StoredOutcome: Decodable, Equatable {
    var status: MutationStatus
    var originalStatus: MutationStatus?
    var code: String?
    var errors: [String: String]?
    var fields: [String]?
    var message: String?
    /// The record itself, in a result kept whole.
    var record: WireRecord?
    /// The version of the record the result named, in a slim one.
    var recordVersion: Int64?

    enum CodingKeys: String, CodingKey {
        case status, code, errors, fields, message, record
        case originalStatus = "original_status"
    }

    /// A stored row: nil when its result was emptied past retention (or is unreadable).
    init?(text: String?, recordVersion: Int64?) {
        guard let text, !text.isEmpty, var outcome = try? WireCoding.decode(Self.self, from: Data(text.utf8)) else { return nil }
        outcome.recordVersion = recordVersion
        self = outcome
    }

    init(
        status: MutationStatus, originalStatus: MutationStatus? = nil, code: String? = nil, errors: [String: String]? = nil,
        fields: [String]? = nil, message: String? = nil, record: WireRecord? = nil, recordVersion: Int64? = nil
    ) {
        self.status = status
        self.originalStatus = originalStatus
        self.code = code
        self.errors = errors
        self.fields = fields
        self.message = message
        self.record = record
        self.recordVersion = recordVersion
    }

    /// The status the mutation got when it was first processed.
    var firstStatus: MutationStatus? { status == .duplicate ? originalStatus : status }

    /// The `result` column of a slim row: the outcome without seq, id and record.
    var slimText: String {
        guard code != nil || errors != nil || fields != nil || message != nil else {
            // The usual row, written without an encoder on the push's hot path.
            var text = #"{"status":""# + status.rawValue + "\""
            if let originalStatus { text += #","original_status":""# + originalStatus.rawValue + "\"" }
            return text + "}"
        }
        struct Slim: Encodable {
            var status: MutationStatus
            var originalStatus: MutationStatus?
            var code: String?
            var errors: [String: String]?
            var fields: [String]?
            var message: String?
            enum CodingKeys: String, CodingKey {
                case status, code, errors, fields, message
                case originalStatus = "original_status"
            }
        }
        let slim = Slim(status: status, originalStatus: originalStatus, code: code, errors: errors, fields: fields, message: message)
        return (try? WireCoding.encode(slim)).map { String(decoding: $0, as: UTF8.self) } ?? #"{"status":""# + status.rawValue + "\"}"
    }

    /// The record this result named, as that change left it: the current
    /// row when it is still at that version, else the history row of that
    /// version (its data, or the record's own for the newest version).
    /// Nil when neither holds it any more (purged past the horizon).
    func record(collection: String, uuid: String, in sql: any SQLExecutor) throws -> WireRecord? {
        if let record { return record }
        guard let version = recordVersion, let current = try sql.record(collection, uuid) else { return nil }
        if current.version == version { return try current.wire() }
        guard
            let row = try sql.first(
                """
                SELECT at, op, owner, team, device_time, data FROM record_history
                WHERE collection = ? AND uuid = ? AND version = ?
                """, [.text(collection), .text(uuid), .integer(version)])
        else { return nil }
        var then = current
        then.version = version
        then.updatedAt = row.string(0)
        then.deleted = row.string(1) == RecordHistory.Operation.delete.rawValue
        then.owner = row.string(2)
        then.team = row.string(3)
        then.deviceTime = row.optionalString(4)
        then.dataText = then.deleted ? nil : RecordHistory.data(stored: row.optionalString(5), version: version, of: current)
        return try then.wire()
    }
}
