package import Foundation

/// The body of `POST /v1/push`.
package struct PushRequest: Sendable, Equatable, Codable {
    package var clientID: UUID
    package var mutations: [Mutation]

    /// The most mutations one push may carry (docs/protocol.md: 413 above it).
    package static let maximumMutations = 500

    package init(clientID: UUID, mutations: [Mutation]) {
        self.clientID = clientID
        self.mutations = mutations
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: WireKey.self)
        clientID = try container.decodeUUID(forKey: .clientID)
        mutations = try container.decode([Mutation].self, forKey: .mutations)
        var previous: Int64 = 0
        for mutation in mutations {
            guard mutation.seq > previous else {
                throw DecodingError.dataCorruptedError(
                    forKey: .mutations, in: container, debugDescription: "must be in strictly increasing seq order")
            }
            previous = mutation.seq
        }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encodeUUID(clientID, forKey: .clientID)
        try container.encode(mutations, forKey: .mutations)
    }
}

/// What the server did with one mutation.
package enum MutationStatus: String, Sendable, Codable, CaseIterable {
    /// The effect took place now.
    case applied
    /// The seq was already processed (a retry); the original result rides along when kept.
    case duplicate
    /// The record changed since `base_version` (or the uuid belongs to another
    /// client's create); `record` carries the current server copy.
    case conflict
    /// The data failed validation; `errors` says which field and why.
    case rejected
    /// The caller may not write this record or collection.
    case forbidden
    /// The record does not exist on the server (or is out of the caller's scope).
    case notFound = "not_found"

    package init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let status = MutationStatus(rawValue: text) else {
            let known = MutationStatus.allCases.map(\.rawValue).joined(separator: ", ")
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "must be one of \(known) (got '\(text)')")
        }
        self = status
    }

    /// Whether the server holds the mutation's effect.
    package var isSuccess: Bool { self == .applied || self == .duplicate }
}

/// The server's answer for one mutation of a push.
package struct MutationResult: Sendable, Equatable, Codable {
    package var seq: Int64
    package var id: UUID
    package var status: MutationStatus
    /// The record after the write (`applied`), the current copy (`conflict`),
    /// or the original result's record (`duplicate`, when the server kept it).
    package var record: WireRecord?
    /// For a `duplicate`: the status the mutation had when first processed.
    package var originalStatus: MutationStatus?
    /// Machine-readable reason for a refusal (`invalid_field`, `forbidden`…).
    package var code: String?
    /// Field-by-field problems of a rejected mutation.
    package var errors: [String: String]?
    /// For a `conflict` under `merge_fields`: the fields changed on both sides.
    package var fields: [String]?
    /// For a refusal by the database of an app's own table
    /// (`constraint_violation`): the database's own words.
    package var message: String?

    package init(
        seq: Int64, id: UUID, status: MutationStatus, record: WireRecord? = nil,
        originalStatus: MutationStatus? = nil, code: String? = nil, errors: [String: String]? = nil,
        fields: [String]? = nil, message: String? = nil
    ) {
        self.seq = seq
        self.id = id
        self.status = status
        self.record = record
        self.originalStatus = originalStatus
        self.code = code
        self.errors = errors
        self.fields = fields
        self.message = message
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: WireKey.self)
        seq = try container.decode(Int64.self, forKey: .seq)
        id = try container.decodeUUID(forKey: .id)
        status = try container.decode(MutationStatus.self, forKey: .status)
        record = try container.decodeIfPresent(WireRecord.self, forKey: .record)
        originalStatus = try container.decodeIfPresent(MutationStatus.self, forKey: .originalStatus)
        code = try container.decodeIfPresent(String.self, forKey: .code)
        errors = try container.decodeIfPresent([String: String].self, forKey: .errors)
        fields = try container.decodeIfPresent([String].self, forKey: .fields)
        message = try container.decodeIfPresent(String.self, forKey: .message)
        if status == .applied && record == nil {
            throw DecodingError.keyNotFound(
                WireKey.record, .init(codingPath: container.codingPath, debugDescription: "applied needs record"))
        }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encode(seq, forKey: .seq)
        try container.encodeUUID(id, forKey: .id)
        try container.encode(status, forKey: .status)
        try container.encodeIfPresent(record, forKey: .record)
        try container.encodeIfPresent(originalStatus, forKey: .originalStatus)
        try container.encodeIfPresent(code, forKey: .code)
        try container.encodeIfPresent(errors, forKey: .errors)
        try container.encodeIfPresent(fields, forKey: .fields)
        try container.encodeIfPresent(message, forKey: .message)
    }
}

/// The answer of `POST /v1/push`.
package struct PushResponse: Sendable, Equatable, Codable {
    package var results: [MutationResult]
    /// The highest seq the server has processed for this (user, client).
    package var lastSeq: Int64
    package var serverTime: ServerTimestamp
    /// Each result's record data as the answer's bytes said it, by seq
    /// (`readWire` only; empty when decoded otherwise). Settling stores this
    /// text instead of writing the parsed data out again. Not part of what
    /// the answer says: equality ignores it.
    package var recordDataTexts: [Int64: String] = [:]
    /// Seqs whose result's `record.data` was left empty by `readWire` (its
    /// text is in `recordDataTexts`): applied results, read as text only.
    /// Equality ignores it too.
    package var deferredRecordData: Set<Int64> = []

    package init(results: [MutationResult], lastSeq: Int64, serverTime: ServerTimestamp) {
        self.results = results
        self.lastSeq = lastSeq
        self.serverTime = serverTime
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: WireKey.self)
        results = try container.decode([MutationResult].self, forKey: .results)
        lastSeq = try container.decode(Int64.self, forKey: .lastSeq)
        serverTime = try container.decode(ServerTimestamp.self, forKey: .serverTime)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encode(results, forKey: .results)
        try container.encode(lastSeq, forKey: .lastSeq)
        try container.encode(serverTime, forKey: .serverTime)
    }

    package static func == (lhs: PushResponse, rhs: PushResponse) -> Bool {
        lhs.results == rhs.results && lhs.lastSeq == rhs.lastSeq && lhs.serverTime == rhs.serverTime
    }
}

/// The answer of `GET /v1/mutations/{id}`: the stored result of a processed mutation.
package struct MutationLookup: Sendable, Equatable, Codable {
    package var status: MutationStatus
    package var record: WireRecord?
    package var code: String?
    package var errors: [String: String]?

    package init(status: MutationStatus, record: WireRecord? = nil, code: String? = nil, errors: [String: String]? = nil) {
        self.status = status
        self.record = record
        self.code = code
        self.errors = errors
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: WireKey.self)
        status = try container.decode(MutationStatus.self, forKey: .status)
        record = try container.decodeIfPresent(WireRecord.self, forKey: .record)
        code = try container.decodeIfPresent(String.self, forKey: .code)
        errors = try container.decodeIfPresent([String: String].self, forKey: .errors)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encode(status, forKey: .status)
        try container.encodeIfPresent(record, forKey: .record)
        try container.encodeIfPresent(code, forKey: .code)
        try container.encodeIfPresent(errors, forKey: .errors)
    }
}
