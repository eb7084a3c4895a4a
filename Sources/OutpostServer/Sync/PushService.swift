import Foundation
import OutpostCore

/// `POST /v1/push` (docs/protocol.md, push rules 1-7).
///
/// A whole push runs in one write transaction: the dedupe check, each
/// mutation's effect, its stored result and the advance of `last_seq` commit
/// together. A transient failure rolls the push back entirely (503), so the
/// client's resend with the same seqs applies it all, once.
struct PushService {
    let database: any ServerDatabase
    let config: ServerConfig
    let clock: any WallClock
    var hooks: ServerHooks?
    /// Told what each committed push touched (the live channels' wake-ups).
    var hub: LiveHub?

    /// The answer of a push: its body, written once (each result's text is
    /// also what the dedupe row keeps), and the statuses for the metrics.
    struct Answer {
        var body: [UInt8]
        var statuses: [MutationStatus]
    }

    /// `caller`: the app version and schema the request declared, kept per client.
    func push(_ request: PushRequest, as principal: Principal, caller: CallerVersion = CallerVersion()) throws -> Answer {
        guard request.mutations.count <= PushRequest.maximumMutations else {
            throw APIError(.payloadTooLarge, "A push may carry at most \(PushRequest.maximumMutations) changes.")
        }
        let now = ServerTimestamp(clock.now())
        let client = request.clientID.wireText
        var notice = CommitNotice()
        defer { hub?.committed(notice) }
        // An app's own table refused a change: run again, each table write under a savepoint.
        var savepoints = false
        while true {
            do {
                return try push(request, as: principal, caller: caller, client: client, now: now, savepoints: savepoints) {
                    notice = $0
                }
            } catch is TableRefusal.NeedsSavepoints where !savepoints {
                savepoints = true
            }
        }
    }

    private func push(
        _ request: PushRequest, as principal: Principal, caller: CallerVersion, client: String, now: ServerTimestamp,
        savepoints: Bool, committing: (CommitNotice) -> Void
    ) throws -> Answer {
        try database.write { sql in
            var session = PushSession(
                sql: sql, config: config, principal: principal, client: client, now: now,
                versions: try FeedVersions.begin(sql))
            session.usesSavepoints = savepoints
            // A transaction retried after a busy database starts its notice again.
            committing(CommitNotice())
            var lastSeq = try session.lockClientSeq()
            let oldestServer = try SchemaState.oldestServer(sql)
            session.resultIDs = ResultIDs(dialect: sql.dialect, oldestServer: oldestServer)
            try session.requireSameMutations(under: request.mutations.filter { $0.seq <= lastSeq }, lastSeq: lastSeq)
            var results: [[UInt8]] = []
            var stored = StoredResults(
                user: principal.user, client: client, now: now, slim: oldestServer >= ServerSchema.slimResultsStep,
                ids: session.resultIDs)
            var statuses: [MutationStatus] = []
            let earlier = try session.resultsByID(of: request.mutations.filter { $0.seq > lastSeq })
            // Creates into the app's own tables, written for the whole batch at once where they are plain.
            if !config.mappedTables.isEmpty {
                let once = Dictionary(grouping: request.mutations, by: \.uuid).filter { $0.value.count == 1 }
                try session.prepareTableCreates(
                    request.mutations.filter { $0.seq > lastSeq && earlier[$0.id.wireText] == nil && once[$0.uuid] != nil })
            }
            for mutation in request.mutations {
                if mutation.seq <= lastSeq {
                    let result = try session.duplicate(of: mutation)
                    results.append(Array(try WireCoding.encode(result)))
                    statuses.append(result.status)
                    continue
                }
                // A mutation id is applied once per client, whatever seq it
                // comes under: two copies of one database may send the same
                // queued change under different seqs.
                let text: [UInt8]
                if let original = earlier[mutation.id.wireText] {
                    let result = try session.duplicate(of: mutation, original: original)
                    text = Array(try WireCoding.encode(result))
                    statuses.append(result.status)
                    try stored.add(mutation, result: text, slim: session.slim(result), in: sql)
                } else {
                    session.overwritten = nil
                    let outcome = try session.apply(mutation)
                    try PushProblems.keep(
                        outcome, of: mutation, overwritten: session.overwritten, user: principal.user, client: client,
                        now: now, in: sql)
                    text = outcome.wire(mutation)
                    statuses.append(outcome.status)
                    try stored.add(mutation, result: text, slim: session.slim(outcome, of: mutation), in: sql)
                }
                lastSeq = mutation.seq
                results.append(text)
            }
            try stored.flush(sql)
            try sql.execute(
                """
                INSERT INTO client_seqs (user_id, client_id, last_seq, updated_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (user_id, client_id) DO UPDATE SET last_seq = excluded.last_seq, updated_at = excluded.updated_at
                """,
                [.text(principal.user), .text(client), .integer(lastSeq), .text(now.rawValue)])
            try sql.execute(
                """
                INSERT INTO client_versions (user_id, client_id, schema_version, app, seen_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (user_id, client_id) DO UPDATE SET schema_version = excluded.schema_version, app = excluded.app,
                    seen_at = excluded.seen_at
                """,
                [
                    .text(principal.user), .text(client), caller.schema.map { .integer(Int64($0)) } ?? .null, .text(caller.app),
                    .text(now.rawValue),
                ])
            try session.versions.finish(sql)
            if let hub, !session.notice.isEmpty { try database.announce(session.notice.payload(origin: hub.origin), in: sql) }
            try hooks?.beforePushCommit?(principal.user)
            committing(session.notice)
            return Answer(body: PushResponse.wireBytes(results: results, lastSeq: lastSeq, serverTime: now), statuses: statuses)
        }
    }
}

/// One push's work inside its transaction.
struct PushSession {
    let sql: any SQLExecutor
    let config: ServerConfig
    let principal: Principal
    let client: String
    let now: ServerTimestamp
    var versions: FeedVersions
    /// What this push wrote: the collections, owners and teams it touched.
    var notice = CommitNotice()
    /// The server's copy the last mutation replaced without having seen it
    /// (its base version was older, and the collection lets the last write win).
    var overwritten: ServerRecord?
    /// Whether each write to an app's own table runs under a savepoint: set
    /// when the push is run again after the table refused one of its changes.
    var usesSavepoints = false
    /// Outcomes of creates already written for the whole batch (`prepareTableCreates`), by mutation id.
    var prepared: [UUID: PushOutcome] = [:]
    /// How `mutation_results` holds ids in this database now.
    var resultIDs = ResultIDs(asBytes: false)

    var scope: Scope { Scope(principal: principal, config: config) }

    /// The client's `last_seq`, its row locked until COMMIT: one client's
    /// pushes run one at a time. A client's first push makes the row first
    /// (two first pushes at once meet on its key), then locks it; every
    /// later push locks it in one statement.
    func lockClientSeq() throws -> Int64 {
        let key: [SQLValue] = [.text(principal.user), .text(client)]
        let select = "SELECT last_seq FROM client_seqs WHERE user_id = ? AND client_id = ?" + sql.forUpdate
        if let row = try sql.first(select, key) { return row.int(0) }
        try sql.execute(
            "INSERT INTO client_seqs (user_id, client_id, last_seq, updated_at) VALUES (?, ?, 0, ?) ON CONFLICT (user_id, client_id) DO NOTHING",
            key + [.text(now.rawValue)])
        return try sql.first(select, key)?.int(0) ?? 0
    }

    /// A seq at or below `last_seq` is a retry only when this server applied
    /// the same mutation id under it. A restored backup or a copied profile
    /// numbers NEW mutations with seqs already used for others; answering
    /// those `duplicate` would lose them in silence. So when any id differs,
    /// or is no longer known, the whole push is refused (`409 client_behind`,
    /// nothing applied) and the client renumbers exactly the listed seqs.
    func requireSameMutations(under retries: [Mutation], lastSeq: Int64) throws {
        guard !retries.isEmpty else { return }
        let known = try storedIDs(bySeq: retries.map(\.seq))
        let behind = retries.filter { known[$0.seq] != $0.id.wireText }.map(\.seq)
        guard !behind.isEmpty else { return }
        var error = APIError(
            .clientBehind,
            "This device reused \(behind.count) change number(s) the server holds other changes for (a restored backup or a copied profile); renumber them above \(lastSeq) and send again.")
        error.body.lastSeq = lastSeq
        error.body.seqs = behind
        throw error
    }

    /// Stored results of these mutations' ids under earlier seqs, by id.
    ///
    /// Looked up by id alone, in slices (a statement's parameters are
    /// bounded on both backends), and the rows of other users or clients
    /// dropped here: the only index that can serve the query is the one on
    /// mutation ids, so its plan needs no statistics (see the migration).
    func resultsByID(of mutations: [Mutation]) throws -> [String: StoredOutcome?] {
        var found: [String: StoredOutcome?] = [:]
        for start in stride(from: 0, to: mutations.count, by: 200) {
            let slice = mutations[start..<min(start + 200, mutations.count)]
            for row in try sql.query(Self.resultsByIDQuery(slice.count), slice.map { resultIDs.value($0.id) })
            where row.string(0) == principal.user && ResultIDs.text(row.values[1]) == client {
                let outcome = StoredOutcome(text: row.optionalString(3), recordVersion: row.optionalInt(4))
                found[ResultIDs.text(row.values[2])] = .some(outcome)
            }
        }
        return found
    }

    /// The mutation ids this client's `seqs` were stored under: one range
    /// of the primary key (an equality on user and client, then a range on
    /// seq, is an index condition whatever the planner knows), the seqs not
    /// asked for dropped here.
    private func storedIDs(bySeq seqs: [Int64]) throws -> [Int64: String] {
        guard let low = seqs.min(), let high = seqs.max() else { return [:] }
        let wanted = Set(seqs)
        var found: [Int64: String] = [:]
        let key: [SQLValue] = [.text(principal.user), resultIDs.value(client), .integer(low), .integer(high)]
        for row in try sql.query(Self.idsBySeqQuery, key) where wanted.contains(row.int(0)) {
            found[row.int(0)] = ResultIDs.text(row.values[1])
        }
        return found
    }

    /// A seq already processed: never applied again; the original result rides along.
    func duplicate(of mutation: Mutation) throws -> MutationResult {
        let stored = try sql.first(
            "SELECT result, record_version FROM mutation_results WHERE user_id = ? AND client_id = ? AND seq = ?",
            [.text(principal.user), resultIDs.value(client), .integer(mutation.seq)])
        return try duplicate(
            of: mutation, original: StoredOutcome(text: stored?.optionalString(0), recordVersion: stored?.optionalInt(1)))
    }

    /// `duplicate`, carrying the original result when it is still held.
    func duplicate(of mutation: Mutation, original: StoredOutcome?) throws -> MutationResult {
        guard let original else { return MutationResult(seq: mutation.seq, id: mutation.id, status: .duplicate) }
        let originalStatus = original.firstStatus
        var record: WireRecord?
        // A change that lost a conflict is told the server's copy as it is
        // now, not as it was when the lost answer was written: the device may
        // already hold a newer copy, which the old one would replace (and its
        // cursor is past the newer one, so it would never come again).
        if originalStatus == .conflict {
            if let current = try load(mutation.collection, mutation.uuid.wireText), scope.canRead(current) {
                record = try current.wire()
            } else {
                record = original.record
            }
        } else {
            record = try original.record(collection: mutation.collection, uuid: mutation.uuid.wireText, in: sql)
        }
        return MutationResult(
            seq: mutation.seq, id: mutation.id, status: .duplicate, record: record, originalStatus: originalStatus,
            code: original.code, errors: original.errors, fields: original.fields, message: original.message)
    }

    /// What the dedupe row of a result made now keeps when results are
    /// slim: nil keeps the whole result (a record of an app's own table).
    /// A conflict's record is never kept: a retry is told the current copy.
    func slim(_ outcome: PushOutcome, of mutation: Mutation) -> StoredOutcome? {
        guard config.mappedTables[mutation.collection] == nil else { return nil }
        return StoredOutcome(
            status: outcome.status, code: outcome.code, errors: outcome.errors, fields: outcome.fields,
            message: outcome.message, recordVersion: outcome.status == .conflict ? nil : outcome.record?.version)
    }

    /// The same for a `duplicate` answered under a new seq.
    func slim(_ result: MutationResult) -> StoredOutcome? {
        guard config.mappedTables[result.record?.collection ?? ""] == nil else { return nil }
        let firstStatus = result.status == .duplicate ? result.originalStatus : result.status
        return StoredOutcome(
            status: result.status, originalStatus: result.originalStatus, code: result.code, errors: result.errors,
            fields: result.fields, message: result.message, recordVersion: firstStatus == .conflict ? nil : result.record?.version)
    }

    mutating func apply(_ mutation: Mutation) throws -> PushOutcome {
        if let outcome = prepared.removeValue(forKey: mutation.id) { return outcome }
        func result(_ status: MutationStatus, _ record: ServerRecord? = nil, code: String? = nil, errors: [String: String]? = nil)
            -> PushOutcome
        {
            PushOutcome(status: status, record: record, code: code, errors: errors)
        }
        guard let schema = config.collections[mutation.collection] else {
            return result(
                .rejected, code: "unknown_collection",
                errors: [WireKey.collection.name: "'\(mutation.collection)' is not a collection of this server"])
        }
        if let table = config.mappedTables[mutation.collection] { return try applyToTable(mutation, table) }
        // Locked until COMMIT: another push changing it waits for this one.
        let existing = try load(mutation.collection, mutation.uuid.wireText, forUpdate: true)
        if schema.readOnly {
            return result(
                .forbidden, code: "read_only", errors: [WireKey.collection.name: "'\(schema.name)' is read-only"])
        }
        if let outcome = try meets(mutation, existing, policy: schema.policy) { return outcome }
        if mutation.op == .create {
            let data = mutation.data ?? [:]
            let problems = try validator(schema).problems(changed: data, merged: data)
            guard problems.isEmpty else { return result(.rejected, code: "invalid_field", errors: problems) }
            let missing = try missingAttachments(schema, changed: data, before: nil)
            guard missing.isEmpty else { return result(.rejected, code: "missing_attachment", errors: missing) }
            return result(.applied, try insert(schema, mutation, data))
        }
        // `meets` answered an update or delete of a record that is not there.
        guard let existing else { return result(.notFound, code: "not_found") }
        if mutation.op == .delete {
            return result(.applied, try write(existing, data: nil, schema: schema, mutation: mutation))
        }
        let patch = mutation.data ?? [:]
        let merged = (try existing.data() ?? [:]).applyingPatch(patch)
        let problems = try validator(schema).problems(changed: patch, merged: merged)
        guard problems.isEmpty else { return result(.rejected, code: "invalid_field", errors: problems) }
        let missing = try missingAttachments(schema, changed: patch, before: try existing.data())
        guard missing.isEmpty else { return result(.rejected, code: "missing_attachment", errors: missing) }
        return result(.applied, try write(existing, data: merged, schema: schema, mutation: mutation))
    }

    /// What a change meets before it writes, the same for every collection:
    /// a create of a record that exists (the same client's, answered
    /// `duplicate`: its answer was lost; anyone else's a conflict); an update
    /// or delete of a record out of the caller's scope (`not_found`), of a
    /// tombstone (a delete is done, an edit conflicts and cannot resurrect
    /// it), or from a stale base, decided by the collection's policy. Nil:
    /// the change goes on (under `last_write_wins`, noting what it overwrites).
    mutating func meets(_ mutation: Mutation, _ existing: ServerRecord?, policy: ConflictPolicy) throws -> PushOutcome? {
        switch mutation.op {
        case .create:
            guard let existing else { return nil }
            if existing.createdByUser == principal.user && existing.createdByClient == client {
                return PushOutcome(status: .duplicate, record: existing)
            }
            return PushOutcome(status: .conflict, record: scope.canRead(existing) ? existing : nil)
        case .update, .delete:
            guard let existing, scope.owns(owner: existing.owner, team: existing.team) else {
                return PushOutcome(status: .notFound, code: "not_found")
            }
            if existing.deleted { return PushOutcome(status: mutation.op == .delete ? .applied : .conflict, record: existing) }
            guard let base = mutation.baseVersion, base != existing.version else { return nil }
            switch policy {
            case .serverWins:
                return PushOutcome(status: .conflict, record: existing)
            case .lastWriteWins:
                overwritten = existing
                return nil
            case .mergeFields:
                // Applied only when no field it sends changed since its base; a
                // delete, or a base whose copy is no longer held, conflicts.
                guard mutation.op == .update, let changed = try FieldChanges.since(base, of: existing, in: sql) else {
                    return PushOutcome(status: .conflict, record: existing)
                }
                let both = changed.intersection((mutation.data ?? [:]).keys).sorted()
                guard both.isEmpty else { return PushOutcome(status: .conflict, record: existing, fields: both) }
                return nil
            }
        }
    }

    /// Attachment fields this mutation sets to a blob the server does not
    /// hold completely, or that the caller never uploaded (knowing a hash is
    /// not having the photo). A value the record already had passes.
    func missingAttachments(_ schema: CollectionSchema, changed: JSONObject, before: JSONObject?) throws -> [String: String] {
        var missing: [String: String] = [:]
        for (field, attachment) in AttachedFile.all(in: changed, schema: schema) {
            if let before, before[field] == changed[field] { continue }
            let held = try sql.first(
                """
                SELECT 1 FROM blobs JOIN blob_owners ON blob_owners.sha256 = blobs.sha256
                WHERE blobs.sha256 = ? AND blobs.complete = 1 AND blobs.size = ? AND blob_owners.user_id = ?
                """, [.text(attachment.sha256), .integer(attachment.size), .text(principal.user)])
            if held == nil { missing[field] = "names a blob this server does not hold completely: upload it first" }
        }
        return missing
    }

    /// Which blobs the record names now (read access to a blob follows its records).
    func recordReferences(_ schema: CollectionSchema, collection: String, uuid: String, data: JSONObject?) throws {
        guard schema.fields.values.contains(where: { $0.type == .attachment }) else { return }
        try sql.execute("DELETE FROM blob_refs WHERE collection = ? AND uuid = ?", [.text(collection), .text(uuid)])
        for sha in Set(AttachedFile.all(in: data, schema: schema).values.map(\.sha256)) {
            try sql.execute(
                "INSERT INTO blob_refs (sha256, collection, uuid) VALUES (?, ?, ?)", [.text(sha), .text(collection), .text(uuid)])
        }
    }

    func validator(_ schema: CollectionSchema) -> Validator {
        Validator(schema: schema) { collection, uuid in
            guard let target = try load(collection, uuid), !target.deleted else { return false }
            return scope.canRead(target)
        }
    }

    func load(_ collection: String, _ uuid: String, forUpdate: Bool = false) throws -> ServerRecord? {
        try sql.record(collection, uuid, forUpdate: forUpdate)
    }

    // The push's lookups, each answerable by one index whatever the database
    // knows of its tables (tests check their plans on a new database).
    static func resultsByIDQuery(_ count: Int) -> String {
        "SELECT user_id, client_id, mutation_id, result, record_version FROM mutation_results WHERE mutation_id IN ("
            + Array(repeating: "?", count: count).joined(separator: ", ") + ")"
    }
    static let idsBySeqQuery =
        "SELECT seq, mutation_id FROM mutation_results WHERE user_id = ? AND client_id = ? AND seq BETWEEN ? AND ?"

    private mutating func insert(_ schema: CollectionSchema, _ mutation: Mutation, _ data: JSONObject) throws -> ServerRecord {
        var data = data
        if let window = schema.windowField, data[window] == nil || data[window]?.isNull == true {
            data[window] = .string(now.rawValue)
        }
        let version = try versions.next()
        notice.add(collection: mutation.collection, owner: principal.user, team: principal.team)
        let uuid = mutation.uuid.wireText
        let dataText = try data.jsonText()
        // The row's id comes back from the insert: the record is not read back.
        let id = try sql.insertReturningID(
            """
            INSERT INTO records (collection, uuid, version, updated_at, deleted, owner, team, created_by_user,
                created_by_client, window_at, data, device_time, written_user, written_client, written_seq, written_version)
            VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(mutation.collection), .text(uuid), .integer(version), .text(now.rawValue),
                .text(principal.user), .text(principal.team), .text(principal.user), .text(client),
                .text(Self.windowValue(schema, data)), .text(dataText), .text(mutation.deviceTime?.rawValue),
                .text(principal.user), .text(client), .integer(mutation.seq), .integer(version),
            ])
        let stored = ServerRecord(
            id: id, collection: mutation.collection, uuid: uuid, version: version, updatedAt: now.rawValue, deleted: false,
            owner: principal.user, team: principal.team, createdByUser: principal.user, createdByClient: client,
            dataText: dataText, deviceTime: mutation.deviceTime?.rawValue)
        try SearchIndex.add(id: id, data: dataText, in: sql)
        try recordReferences(schema, collection: mutation.collection, uuid: mutation.uuid.wireText, data: data)
        try RecordHistory.keep(stored, op: .create, replacing: nil, user: principal.user, client: client, in: sql)
        return stored
    }

    /// Writes new data (nil = tombstone) at the next feed version, as `mutation` asked.
    private mutating func write(
        _ existing: ServerRecord, data: JSONObject?, schema: CollectionSchema, mutation: Mutation
    ) throws -> ServerRecord {
        let deviceTime = mutation.deviceTime
        try versions.requireNewer(than: existing.version)
        let version = try versions.next()
        let dataText = try data?.jsonText()
        notice.add(collection: existing.collection, owner: existing.owner, team: existing.team)
        try sql.execute(
            """
            UPDATE records SET version = ?, updated_at = ?, deleted = ?, window_at = ?, data = ?, device_time = ?,
                written_user = ?, written_client = ?, written_seq = ?, written_version = ?
            WHERE id = ?
            """,
            [
                .integer(version), .text(now.rawValue), .bool(data == nil),
                .text(data.flatMap { Self.windowValue(schema, $0) }), .text(dataText),
                .text(deviceTime?.rawValue), .text(principal.user), .text(client), .integer(mutation.seq), .integer(version),
                .integer(existing.id),
            ])
        try SearchIndex.replace(id: existing.id, old: existing.dataText, new: dataText, in: sql)
        try recordReferences(schema, collection: existing.collection, uuid: existing.uuid, data: data)
        var updated = existing
        updated.version = version
        updated.updatedAt = now.rawValue
        updated.deleted = data == nil
        updated.dataText = dataText
        updated.deviceTime = deviceTime?.rawValue
        try RecordHistory.keep(
            updated, op: data == nil ? .delete : .update, replacing: existing, user: principal.user, client: client, in: sql)
        return updated
    }

    /// The window field's value, normalised to the server's UTC format so
    /// that text comparison orders it.
    static func windowValue(_ schema: CollectionSchema, _ data: JSONObject) -> String? {
        guard let field = schema.windowField, let text = data[field]?.stringValue,
            let date = ServerTimestamp(rawValue: text).date
        else { return nil }
        return ServerTimestamp(date).rawValue
    }
}

/// What a request says about the app that sent it (`Outpost-Schema`,
/// `Outpost-Client`).
struct CallerVersion: Sendable, Equatable {
    var schema: Int?
    var app: String?

    init(schema: Int? = nil, app: String? = nil) {
        self.schema = schema
        self.app = app
    }

    init(_ request: HTTPRequest) {
        schema = request.headers["outpost-schema"].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        // Kept short: a header is the caller's to fill.
        app = request.headers["outpost-client"].map { String($0.prefix(200)) }
    }
}

/// What the server did with one mutation it applied or refused now: the
/// record as stored, written to the answer with its data text spliced in.
struct PushOutcome {
    var status: MutationStatus
    var record: ServerRecord?
    var code: String?
    var errors: [String: String]?
    /// A `merge_fields` conflict's fields changed on both sides.
    var fields: [String]?
    /// An app table's refusal in the database's words.
    var message: String?

    /// The result's wire JSON, for the answer and the dedupe row alike.
    func wire(_ mutation: Mutation) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(160 + (record?.dataText?.utf8.count ?? 0))
        MutationResult.appendWire(
            seq: mutation.seq, id: mutation.id, status: status, code: code, errors: errors, fields: fields,
            message: message, record: record.map { record in { record.appendJSON(to: &$0) } }, to: &out)
        return out
    }
}

/// The dedupe rows of one push (each mutation's result, as a retry is
/// answered). On SQLite each is inserted as it is made; on PostgreSQL they
/// are written together at the end of the push, a round trip per 500 rather
/// than per mutation, in the same transaction.
///
/// `slim`: once no older server reads them (`ServerSchema.slimResultsStep`),
/// rows keep the outcome and the record's version, not the record
/// (`StoredOutcome`); until then, the whole result, as older servers read it.
/// `ids`: the client's and the mutations' ids as the table holds them (`ResultIDs`).
struct StoredResults {
    let user: String
    let client: String
    let now: ServerTimestamp
    let slim: Bool
    let ids: ResultIDs
    /// The client's id as the rows hold it, made once per push.
    private let clientID: SQLValue
    private var waiting: [(seq: Int64, id: String, result: String, version: Int64?)] = []

    init(user: String, client: String, now: ServerTimestamp, slim: Bool, ids: ResultIDs) {
        self.user = user
        self.client = client
        self.now = now
        self.slim = slim
        self.ids = ids
        clientID = ids.value(client)
    }

    mutating func add(_ mutation: Mutation, result: [UInt8], slim outcome: StoredOutcome?, in sql: any SQLExecutor) throws {
        let kept = slim ? outcome : nil
        let text = kept?.slimText ?? String(decoding: result, as: UTF8.self)
        let version = kept?.recordVersion
        guard sql.dialect == .postgres else {
            try sql.execute(
                """
                INSERT INTO mutation_results (user_id, client_id, seq, mutation_id, result, created_at, record_version)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(user), clientID, .integer(mutation.seq), ids.value(mutation.id), .text(text),
                    .text(now.rawValue), version.map { .integer($0) } ?? .null,
                ])
            return
        }
        waiting.append((mutation.seq, mutation.id.wireText, text, version))
    }

    mutating func flush(_ sql: any SQLExecutor) throws {
        for start in stride(from: 0, to: waiting.count, by: 500) {
            let slice = waiting[start..<min(start + 500, waiting.count)]
            try sql.execute(
                """
                INSERT INTO mutation_results (user_id, client_id, seq, mutation_id, result, created_at, record_version)
                SELECT ?, ?, CAST(v.seq AS BIGINT), v.id, v.result, ?, CAST(v.version AS BIGINT)
                FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[])) AS v(seq, id, result, version)
                """,
                [
                    .text(user), .text(client), .text(now.rawValue), OwnTableCopies.arrayLiteral(slice.map { String($0.seq) }),
                    OwnTableCopies.arrayLiteral(slice.map(\.id)), OwnTableCopies.arrayLiteral(slice.map(\.result)),
                    OwnTableCopies.arrayLiteral(slice.map { $0.version.map(String.init) }),
                ])
        }
        waiting.removeAll()
    }
}
