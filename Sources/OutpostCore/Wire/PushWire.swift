package import Foundation

// A push's body and its answer written and read without Codable. In a
// profile of the server taking pushes, Foundation's JSON decoder and encoder
// were two fifths of its time; these write the same JSON (keys in another
// order) and read it with the library's own scanner.
//
// The readers are the fast path only: they return nil for anything but a
// well-formed body, and the caller then decodes it with `WireCoding`, whose
// error names the field at fault. Numbers read as Foundation's decoder reads
// them into a `JSONValue`: a whole number written with a fraction or an
// exponent ("4.0", "1e2") is an integer.

extension PushRequest {
    /// The body of `POST /v1/push`.
    package func wireBytes() -> [UInt8] {
        Self.wireBytes(clientID: clientID, mutations) { mutation, out in mutation.appendWire(to: &out) }
    }

    /// The same body from mutations in another form (the device's queued
    /// entries, whose data is written as the text they were stored with).
    package static func wireBytes<Item>(clientID: UUID, _ items: [Item], _ write: (Item, inout [UInt8]) -> Void) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + items.count * 420)
        out.append(contentsOf: WireKey.clientID.opening)
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: clientID.wireText.utf8)
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: WireKey.mutations.member)
        out.append(UInt8(ascii: "["))
        for (offset, item) in items.enumerated() {
            if offset > 0 { out.append(UInt8(ascii: ",")) }
            write(item, &out)
        }
        out.append(contentsOf: "]}".utf8)
        return out
    }

    /// Reads a push body; nil when it is not a well-formed push, or when it
    /// holds a `\u` escape (this scanner mends a lone surrogate where
    /// Foundation's decoder refuses it: such rare bodies take the decoder).
    package static func readWire(_ bytes: [UInt8]) -> PushRequest? {
        if holdsUnicodeEscape(bytes) { return nil }
        var scanner = JSONScanner(bytes)
        var clientID: UUID?
        var mutations: [Mutation]?
        do {
            let whole = try scanner.readMembers { scanner, key in
                switch key {
                case WireKey.clientID.name:
                    clientID = try scanner.readStringValue().flatMap(UUID.fromWire)
                    return clientID != nil
                case WireKey.mutations.name:
                    mutations = try scanner.readElements(Mutation.readWire)
                    guard let mutations else { return false }
                    // In strictly increasing seq order, as the decoder requires.
                    return zip(mutations, mutations.dropFirst()).allSatisfy { $0.seq < $1.seq }
                default:
                    _ = try scanner.skipValue()
                    return true
                }
            }
            guard whole, scanner.atEnd(), let clientID, let mutations else { return nil }
            return PushRequest(clientID: clientID, mutations: mutations)
        } catch {
            return nil
        }
    }
}

/// Whether `\u` occurs anywhere in the bytes.
func holdsUnicodeEscape(_ bytes: [UInt8]) -> Bool {
    bytes.withUnsafeBufferPointer { buffer in
        guard buffer.count > 1 else { return false }
        for index in 0..<(buffer.count - 1) where buffer[index] == UInt8(ascii: "\\") && buffer[index + 1] == UInt8(ascii: "u") {
            return true
        }
        return false
    }
}

extension JSONScanner {
    /// Reads an object, calling `member` for each key with the scanner at
    /// its value; `member` reads the value and returns false to refuse the
    /// whole (then false is returned).
    mutating func readMembers(_ member: (inout JSONScanner, String) throws -> Bool) throws -> Bool {
        try expect(UInt8(ascii: "{"))
        if try consume(UInt8(ascii: "}")) { return true }
        repeat {
            let key = try readString()
            try expect(UInt8(ascii: ":"))
            guard try member(&self, key) else { return false }
        } while try consume(UInt8(ascii: ","))
        try expect(UInt8(ascii: "}"))
        return true
    }

    /// Reads an array, each element with `element`; nil when one is refused.
    mutating func readElements<Element>(_ element: (inout JSONScanner) throws -> Element?) throws -> [Element]? {
        try expect(UInt8(ascii: "["))
        var read: [Element] = []
        if try consume(UInt8(ascii: "]")) { return read }
        repeat {
            guard let value = try element(&self) else { return nil }
            read.append(value)
        } while try consume(UInt8(ascii: ","))
        try expect(UInt8(ascii: "]"))
        return read
    }

    /// An object value as `JSONObject`, numbers read as Foundation's decoder
    /// reads them; `.some(nil)` for null, nil for anything else.
    mutating func readObjectOrNull() throws -> JSONObject?? {
        switch try readValue().readingWholeNumbersAsIntegers {
        case .null: return .some(nil)
        case .object(let object): return .some(object)
        default: return nil
        }
    }

    /// A server time or null (`.some(nil)`); nil for anything else.
    mutating func readTimestampOrNull() throws -> ServerTimestamp?? {
        let value = try readValue()
        if value.isNull { return .some(nil) }
        guard let text = value.stringValue, ServerTimestamp.parse(text) != nil else { return nil }
        return .some(ServerTimestamp(rawValue: text))
    }
}

extension Mutation {
    func appendWire(to out: inout [UInt8]) {
        Self.appendEnvelope(seq: seq, id: id, op: op, collection: collection, uuid: uuid, baseVersion: baseVersion, to: &out)
        if let data {
            out.append(contentsOf: WireKey.data.member)
            JSONWriter.write(.object(data), to: &out)
        }
        Self.appendEnd(deviceTime: deviceTime, to: &out)
    }

    /// One mutation whose data is JSON text already (a queued entry's, as
    /// stored): spliced in as it is, not parsed and written again. The
    /// caller vouches that it is one JSON object.
    package static func appendWire(
        seq: Int64, id: UUID, op: MutationOp, collection: String, uuid: UUID, baseVersion: Int64?, dataText: String?,
        deviceTime: ServerTimestamp?, to out: inout [UInt8]
    ) {
        appendEnvelope(seq: seq, id: id, op: op, collection: collection, uuid: uuid, baseVersion: baseVersion, to: &out)
        if let dataText {
            out.append(contentsOf: WireKey.data.member)
            out.append(contentsOf: dataText.utf8)
        }
        appendEnd(deviceTime: deviceTime, to: &out)
    }

    /// The object's opening and every member before `data`.
    private static func appendEnvelope(
        seq: Int64, id: UUID, op: MutationOp, collection: String, uuid: UUID, baseVersion: Int64?, to out: inout [UInt8]
    ) {
        out.append(contentsOf: WireKey.seq.opening)
        JSONWriter.writeInteger(seq, to: &out)
        out.append(contentsOf: WireKey.id.member)
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: id.wireText.utf8)
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: WireKey.op.member)
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: op.rawValue.utf8)
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: WireKey.collection.member)
        JSONWriter.writeString(collection, to: &out)
        out.append(contentsOf: WireKey.uuid.member)
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: uuid.wireText.utf8)
        out.append(UInt8(ascii: "\""))
        if let baseVersion {
            out.append(contentsOf: WireKey.baseVersion.member)
            JSONWriter.writeInteger(baseVersion, to: &out)
        }
    }

    /// The members after `data`, and the object's close.
    private static func appendEnd(deviceTime: ServerTimestamp?, to out: inout [UInt8]) {
        if let deviceTime {
            out.append(contentsOf: WireKey.deviceTime.member)
            JSONWriter.writeString(deviceTime.rawValue, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// One mutation, with the rules of its `Decodable` conformance; nil when any is broken.
    static func readWire(_ scanner: inout JSONScanner) throws -> Mutation? {
        var seq: Int64?
        var id: UUID?
        var op: MutationOp?
        var collection: String?
        var uuid: UUID?
        var baseVersion: Int64?
        var data: JSONObject?
        var deviceTime: ServerTimestamp?
        let whole = try scanner.readMembers { scanner, key in
            switch key {
            case WireKey.seq.name: seq = try scanner.readValue().wholeNumber
            case WireKey.id.name: id = try scanner.readStringValue().flatMap(UUID.fromWire)
            case WireKey.op.name: op = try scanner.readStringValue().flatMap(MutationOp.init(rawValue:))
            case WireKey.collection.name: collection = try scanner.readStringValue()
            case WireKey.uuid.name: uuid = try scanner.readStringValue().flatMap(UUID.fromWire)
            case WireKey.baseVersion.name:
                let value = try scanner.readValue()
                baseVersion = value.wholeNumber
                return value.isNull || baseVersion != nil
            case WireKey.data.name:
                guard case .some(let object) = try scanner.readObjectOrNull() else { return false }
                data = object
            case WireKey.deviceTime.name:
                guard case .some(let time) = try scanner.readTimestampOrNull() else { return false }
                deviceTime = time
            default: _ = try scanner.skipValue()
            }
            return true
        }
        guard whole, let seq, seq > 0, let id, let op, let collection, !collection.isEmpty, let uuid else { return nil }
        switch op {
        case .create, .update: guard data != nil else { return nil }
        case .delete: guard data == nil else { return nil }
        }
        if op == .create, baseVersion != nil { return nil }
        return Mutation(
            seq: seq, id: id, op: op, collection: collection, uuid: uuid, baseVersion: baseVersion, data: data, deviceTime: deviceTime)
    }
}

extension MutationResult {
    /// One result as the wire carries it; `record` writes the record's JSON
    /// (the server splices its stored data text in).
    package static func appendWire(
        seq: Int64, id: UUID, status: MutationStatus, originalStatus: MutationStatus? = nil, code: String? = nil,
        errors: [String: String]? = nil, fields: [String]? = nil, message: String? = nil,
        record: ((inout [UInt8]) -> Void)?, to out: inout [UInt8]
    ) {
        out.append(contentsOf: WireKey.seq.opening)
        JSONWriter.writeInteger(seq, to: &out)
        out.append(contentsOf: WireKey.id.member)
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: id.wireText.utf8)
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: WireKey.status.member)
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: status.rawValue.utf8)
        out.append(UInt8(ascii: "\""))
        if let record {
            out.append(contentsOf: WireKey.record.member)
            record(&out)
        }
        if let originalStatus {
            out.append(contentsOf: WireKey.originalStatus.member)
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: originalStatus.rawValue.utf8)
            out.append(UInt8(ascii: "\""))
        }
        if let code {
            out.append(contentsOf: WireKey.code.member)
            JSONWriter.writeString(code, to: &out)
        }
        if let errors {
            out.append(contentsOf: WireKey.errors.member)
            JSONWriter.write(.object(errors.mapValues(JSONValue.string)), to: &out)
        }
        if let fields {
            out.append(contentsOf: WireKey.fields.member)
            JSONWriter.write(.array(fields.map(JSONValue.string)), to: &out)
        }
        if let message {
            out.append(contentsOf: WireKey.message.member)
            JSONWriter.writeString(message, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// One result; `recordDataText` gets its record's data as the bytes said
    /// it. With `deferringAppliedData`, the data of an `applied` result's
    /// record is not read into values (`record.data` is left empty, and
    /// `deferred` set): settling stores the text, and reads it only on the
    /// rare path that needs the values. Every other result's data is read.
    static func readWire(
        _ scanner: inout JSONScanner, recordDataText: inout String?, deferringAppliedData: Bool = false,
        deferred: inout Bool
    ) throws -> MutationResult? {
        var seq: Int64?
        var id: UUID?
        var status: MutationStatus?
        var record: WireRecord?
        var originalStatus: MutationStatus?
        var code: String?
        var errors: [String: String]?
        var fields: [String]?
        var message: String?
        let whole = try scanner.readMembers { scanner, key in
            switch key {
            case WireKey.seq.name: seq = try scanner.readValue().wholeNumber
            case WireKey.id.name: id = try scanner.readStringValue().flatMap(UUID.fromWire)
            case WireKey.status.name: status = try scanner.readStringValue().flatMap(MutationStatus.init(rawValue:))
            case WireKey.record.name:
                if try scanner.peek() == UInt8(ascii: "n") { return try scanner.readValue().isNull }
                record = try WireRecord.readWire(
                    &scanner, dataText: &recordDataText, deferringData: deferringAppliedData, deferred: &deferred)
                return record != nil
            case WireKey.originalStatus.name:
                let value = try scanner.readValue()
                originalStatus = value.stringValue.flatMap(MutationStatus.init(rawValue:))
                return value.isNull || originalStatus != nil
            case WireKey.code.name:
                let value = try scanner.readValue()
                code = value.stringValue
                return value.isNull || code != nil
            case WireKey.errors.name:
                switch try scanner.readValue() {
                case .null: errors = nil
                case .object(let object):
                    let texts = object.compactMapValues(\.stringValue)
                    guard texts.count == object.count else { return false }
                    errors = texts
                default: return false
                }
            case WireKey.fields.name:
                switch try scanner.readValue() {
                case .null: fields = nil
                case .array(let values):
                    let names = values.compactMap(\.stringValue)
                    guard names.count == values.count else { return false }
                    fields = names
                default: return false
                }
            case WireKey.message.name:
                let value = try scanner.readValue()
                message = value.stringValue
                return value.isNull || message != nil
            default: _ = try scanner.skipValue()
            }
            return true
        }
        guard whole, let seq, let id, let status else { return nil }
        if status == .applied && record == nil { return nil }
        if deferred && status != .applied {
            // Read after all: only an applied result's data may wait.
            guard let text = recordDataText, case .some(.some(let object)) = try Self.readObject(text) else { return nil }
            record?.data = object
            deferred = false
        }
        return MutationResult(
            seq: seq, id: id, status: status, record: record, originalStatus: originalStatus, code: code, errors: errors,
            fields: fields, message: message)
    }
}

extension WireRecord {
    /// One record, with the rules of its `Decodable` conformance; nil when
    /// any is broken. `dataText` gets its data's JSON text as the bytes
    /// said it (a store keeps it as it is, as it keeps a pull page's).
    /// With `deferringData`, an object's text is only checked as a pull
    /// page's payloads are (`JSONScanner.skipContainer`) and `data` is left
    /// empty; `deferred` says so (`MutationResult.readWire` decides).
    static func readWire(
        _ scanner: inout JSONScanner, dataText: inout String?, deferringData: Bool = false, deferred: inout Bool
    ) throws -> WireRecord? {
        var collection: String?
        var uuid: UUID?
        var id: Int64?
        var version: Int64?
        var updatedAt: ServerTimestamp?
        var deleted: Bool?
        var owner: String?
        var team: String?
        var data: JSONObject?
        var deviceTime: ServerTimestamp?
        let whole = try scanner.readMembers { scanner, key in
            switch key {
            case WireKey.collection.name: collection = try scanner.readStringValue()
            case WireKey.uuid.name: uuid = try scanner.readStringValue().flatMap(UUID.fromWire)
            case WireKey.id.name: id = try scanner.readValue().wholeNumber
            case WireKey.version.name: version = try scanner.readValue().wholeNumber
            case WireKey.updatedAt.name:
                guard case .some(.some(let time)) = try scanner.readTimestampOrNull() else { return false }
                updatedAt = time
            case WireKey.deleted.name: deleted = try scanner.readValue().boolValue
            case WireKey.owner.name: owner = try scanner.readStringValue()
            case WireKey.team.name: team = try scanner.readStringValue()
            case WireKey.data.name:
                scanner.skipWhitespace()
                let start = scanner.index
                if deferringData, try scanner.peek() == UInt8(ascii: "{") {
                    let span = try scanner.skipContainer()
                    data = [:]
                    dataText = String(decoding: scanner.bytes[span], as: UTF8.self)
                    deferred = true
                    return true
                }
                guard case .some(let object) = try scanner.readObjectOrNull() else { return false }
                data = object
                dataText = object == nil ? nil : String(decoding: scanner.bytes[start..<scanner.index], as: UTF8.self)
            case WireKey.deviceTime.name:
                guard case .some(let time) = try scanner.readTimestampOrNull() else { return false }
                deviceTime = time
            default: _ = try scanner.skipValue()
            }
            return true
        }
        guard whole, let collection, !collection.isEmpty, let uuid, let id, let version, let updatedAt, let deleted, let owner,
            let team
        else { return nil }
        if !deleted && data == nil { return nil }
        return WireRecord(
            collection: collection, uuid: uuid, id: id, version: version, updatedAt: updatedAt, deleted: deleted, owner: owner,
            team: team, data: data, deviceTime: deviceTime)
    }
}

extension MutationResult {
    /// A record's data text read into values, as `WireRecord.readWire` reads
    /// it in place; nil when it is not one whole object (or null).
    package static func readObject(_ text: String) throws -> JSONObject?? {
        var scanner = JSONScanner(Array(text.utf8))
        let object = try scanner.readObjectOrNull()
        return scanner.atEnd() ? object : nil
    }
}

extension PushResponse {
    /// The answer's body around results already written (`MutationResult.appendWire`).
    package static func wireBytes(results: [[UInt8]], lastSeq: Int64, serverTime: ServerTimestamp) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(80 + results.reduce(0) { $0 + $1.count + 1 })
        out.append(contentsOf: WireKey.results.opening)
        out.append(UInt8(ascii: "["))
        for (offset, result) in results.enumerated() {
            if offset > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: result)
        }
        out.append(UInt8(ascii: "]"))
        out.append(contentsOf: WireKey.lastSeq.member)
        JSONWriter.writeInteger(lastSeq, to: &out)
        out.append(contentsOf: WireKey.serverTime.member)
        JSONWriter.writeString(serverTime.rawValue, to: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// Reads an answer of `POST /v1/push`; nil when it is not well formed
    /// or holds a `\u` escape (as `PushRequest.readWire`). With
    /// `deferringAppliedData`, applied results' record data is kept as text
    /// only (`deferredRecordData` lists their seqs): reading 500 records'
    /// data into dictionaries was 40% of reading an answer, for values the
    /// usual settlement never looks at.
    package static func readWire(_ bytes: [UInt8], deferringAppliedData: Bool = false) -> PushResponse? {
        if holdsUnicodeEscape(bytes) { return nil }
        var scanner = JSONScanner(bytes)
        var results: [MutationResult]?
        var recordDataTexts: [Int64: String] = [:]
        var deferredRecordData: Set<Int64> = []
        var lastSeq: Int64?
        var serverTime: ServerTimestamp?
        do {
            let whole = try scanner.readMembers { scanner, key in
                switch key {
                case WireKey.results.name:
                    results = try scanner.readElements { scanner in
                        var text: String?
                        var deferred = false
                        let result = try MutationResult.readWire(
                            &scanner, recordDataText: &text, deferringAppliedData: deferringAppliedData, deferred: &deferred)
                        // The first result of a seq is the one settled (as `Outbox.settle` keeps it).
                        if let result, let text, recordDataTexts[result.seq] == nil {
                            recordDataTexts[result.seq] = text
                            if deferred { deferredRecordData.insert(result.seq) }
                        }
                        return result
                    }
                    return results != nil
                case WireKey.lastSeq.name: lastSeq = try scanner.readValue().wholeNumber
                case WireKey.serverTime.name:
                    guard case .some(.some(let time)) = try scanner.readTimestampOrNull() else { return false }
                    serverTime = time
                default: _ = try scanner.skipValue()
                }
                return true
            }
            guard whole, scanner.atEnd(), let results, let lastSeq, let serverTime else { return nil }
            var response = PushResponse(results: results, lastSeq: lastSeq, serverTime: serverTime)
            response.recordDataTexts = recordDataTexts
            response.deferredRecordData = deferredRecordData
            return response
        } catch {
            return nil
        }
    }
}

extension JSONValue {
    /// An integer, as Foundation's decoder reads one into `Int64` (a whole
    /// number with a fraction of zero included); nil for anything else.
    var wholeNumber: Int64? {
        switch self {
        case .int(let number): return number
        case .double(let number): return Int64(exactly: number)
        default: return nil
        }
    }

    /// The value as Foundation's decoder reads it into a `JSONValue`, which
    /// tries `Int64` before `Double`: "4.0" is the integer 4.
    var readingWholeNumbersAsIntegers: JSONValue {
        // Most payloads hold none: they are looked through, not copied.
        guard holdsWholeDouble else { return self }
        switch self {
        case .double(let number):
            if let whole = Int64(exactly: number) { return .int(whole) }
            return self
        case .array(let values): return .array(values.map(\.readingWholeNumbersAsIntegers))
        case .object(let object): return .object(object.mapValues(\.readingWholeNumbersAsIntegers))
        default: return self
        }
    }

    private var holdsWholeDouble: Bool {
        switch self {
        case .double(let number): return Int64(exactly: number) != nil
        case .array(let values): return values.contains { $0.holdsWholeDouble }
        case .object(let object): return object.values.contains { $0.holdsWholeDouble }
        default: return false
        }
    }
}
