import Foundation
import OutpostCore

extension Outbox {
    /// Applies a push's per-mutation results in one transaction and ends the
    /// in-flight batch. Each result removes its entry; an entry without a
    /// result keeps its seq and is resent.
    func settle(_ batch: PushBatch, with response: PushResponse) throws -> PushSettlement {
        guard isLeased(batch) else { throw OutboxError.notInFlight }
        // The lease ends here whatever happens: a settlement that fails (a
        // locked or full disk) rolls back, and the entries, which keep their
        // seqs, are resent and answered `duplicate` with their results.
        defer { dropLease(batch) }
        let results = Dictionary(response.results.map { ($0.seq, $0) }, uniquingKeysWith: { first, _ in first })
        try Self.requireResultsMatch(batch, results)
        var settlement = PushSettlement()
        func answer(to entry: OutboxEntry) -> MutationResult? {
            guard let seq = entry.seq, let result = results[seq], result.id == entry.mutationID else { return nil }
            return result
        }
        try connection.transaction {
            // Statements per answer are most of settling a batch of
            // hundreds: what can be done for the whole batch is done once.
            // Answered entries leave the queue in one statement when the
            // batch names each record once (every batch taken since one
            // mutation per record per push; a queue sent by an older
            // release may hold more, and those go one by one, in order).
            let oneEntryPerRecord = Set(batch.entries.map(\.record)).count == batch.entries.count
            let answered = batch.entries.filter { answer(to: $0) != nil }
            if oneEntryPerRecord { try removeEntries(answered.map(\.entry)) }
            // Usually nothing is in doubt: no statement per create to forget it.
            let doubts = try hasDoubtfulCreates()
            for entry in batch.entries {
                guard let result = answer(to: entry) else {
                    settlement.unanswered.append(entry.entry)
                    try table.noteNoResult(entry.entry)
                    try refreshState(entry.record)
                    continue
                }
                if !oneEntryPerRecord { try table.remove(entry.entry) }
                try settle(
                    entry, result, dataText: response.recordDataTexts[result.seq],
                    dataDeferred: response.deferredRecordData.contains(result.seq), forgettingDoubts: doubts, into: &settlement)
            }
            try forgiveCancelledCreates(newSeqs: response.results.filter { $0.status != .duplicate }.map(\.seq))
            try noteAnswered(answered.compactMap(\.seq))
        }
        return settlement
    }

    /// A result is adopted only for the mutation it names: its record must be
    /// the entry's record. Anything else (a server that answered `duplicate`
    /// with another mutation's record for a reused seq) would overwrite a
    /// local row with another record's data, so the whole answer is refused.
    static func requireResultsMatch(_ batch: PushBatch, _ results: [Int64: MutationResult]) throws {
        for entry in batch.entries {
            guard let seq = entry.seq, let result = results[seq], result.id == entry.mutationID,
                let record = result.record
            else { continue }
            if record.collection != entry.record.collection || record.uuid != entry.record.uuid {
                throw OutboxError.mismatchedResult(
                    seq: seq, sent: entry.record, answered: RecordReference(collection: record.collection, uuid: record.uuid))
            }
        }
    }

    /// Removes answered entries from the queue, in one statement.
    private func removeEntries(_ entries: [Int64]) throws {
        guard !entries.isEmpty else { return }
        try table.remove(entries)
    }

    /// `dataText`: the result's record data as the answer's bytes said it,
    /// when it was read from them; `dataDeferred`: its values were not read
    /// (`PushResponse.deferredRecordData`: `record.data` is empty until
    /// read from `dataText`). `forgettingDoubts`: whether any create is in
    /// doubt (`doubtful_creates` holds a row); when none is, there is
    /// nothing to forget.
    private func settle(
        _ entry: OutboxEntry, _ result: MutationResult, dataText: String?, dataDeferred: Bool = false, forgettingDoubts: Bool,
        into settlement: inout PushSettlement
    ) throws {
        if result.status == .rejected, result.code == "missing_attachment", try requeueAfterMissingAttachment(entry, result) {
            settlement.reuploading.append(entry.record)
            return
        }
        var status = result.status
        if status == .duplicate {
            settlement.duplicates += 1
            // A retry of something already processed: act on the original outcome.
            status = result.originalStatus ?? .duplicate
        }
        switch status {
        case .applied, .duplicate:
            settlement.confirmed.append(entry.record)
            if entry.op == .create, forgettingDoubts { try forgetDoubt(entry.record) }
            if result.status == .duplicate {
                try requeueWhatTheOriginalLacks(entry, result.record)
                if entry.op != .delete, result.record?.deleted == false { settlement.adoptedOriginals.append(entry.record) }
            }
            try confirm(entry, record: result.record, dataText: dataText, dataDeferred: dataDeferred)
        case .conflict:
            settlement.conflicts.append(try conflict(entry, serverRecord: result.record, fields: result.fields ?? []))
        case .notFound where entry.op == .delete:
            // Already gone on the server: the delete's goal holds.
            settlement.confirmed.append(entry.record)
            try confirm(entry, record: nil)
        case .notFound where entry.op == .update:
            // Deleted by someone else (or out of scope): the edit lost, no resurrection.
            settlement.conflicts.append(try conflict(entry, serverRecord: nil))
        case .rejected, .forbidden, .notFound:
            // `message`: the database's own words when an app's table refused the change.
            let rejection = Rejection(
                code: result.code ?? status.rawValue, errors: result.errors ?? [:], op: entry.op, message: result.message)
            settlement.rejected.append(RejectedChange(record: entry.record, mutationID: entry.mutationID, rejection: rejection))
            try reject(entry, rejection)
        }
    }

    /// How often one attachment is uploaded again after `missing_attachment`
    /// before the change is refused like any other.
    static let reuploadBudget = 5

    /// `missing_attachment`: the server does not hold a blob this change
    /// names (it was never uploaded there, or removed as unreferenced while
    /// the change waited). When every such blob is still on the device, it
    /// is queued to upload again and the change goes back to its place in
    /// the queue as a new mutation (a new id, no seq), so it is sent after
    /// the upload. Returns false when some blob is gone from the device: the
    /// change is then refused visibly, never dropped in silence.
    private func requeueAfterMissingAttachment(_ entry: OutboxEntry, _ result: MutationResult) throws -> Bool {
        let named = AttachedFile.all(in: entry.data)
        let fields = Set((result.errors ?? [:]).keys)
        let missing = named.filter { fields.isEmpty || fields.contains($0.key) }.values
        guard !missing.isEmpty else { return false }
        for attachment in missing where try !attachments.requeue(attachment.sha256, budget: Self.reuploadBudget) {
            return false
        }
        try table.insert(
            entry: entry.entry, mutationID: ids.next(), record: entry.record, op: entry.op, baseVersion: entry.baseVersion,
            data: try tables.payloads.stored(try entry.data?.jsonText()), parents: OutboxRow.parentsText(Set(entry.parents)),
            queuedAt: (entry.deviceTime ?? ServerTimestamp(clock.now())).rawValue)
        try tables.setState(entry.record.collection, entry.record.uuid, .pending)
        return true
    }

    /// A `duplicate` says the server applied this mutation id before. Its
    /// content then was normally this entry's: a retry sends the same bytes.
    /// But a database restored from a backup or copied to another device
    /// holds the entry too, and an edit merged into one copy before it was
    /// first sent makes the two differ. Whatever this entry says that the
    /// applied record does not is queued again as a new update (conditional
    /// on the applied version), never dropped in silence.
    private func requeueWhatTheOriginalLacks(_ entry: OutboxEntry, _ record: WireRecord?) throws {
        guard entry.op != .delete, let record, !record.deleted, let sent = entry.data,
            let local = try tables.load(entry.record.collection, entry.record.uuid)
        else { return }
        let applied = record.data ?? [:]
        var missing: JSONObject = [:]
        // Only what the device still holds: a field edited again since is
        // carried by that later edit, and this older value must not overwrite it.
        for (field, value) in sent
        where applied[field] != value && !(value == .null && applied[field] == nil)
            && (local.data[field] == value || (value == .null && local.data[field] == nil))
        {
            missing[field] = value
        }
        guard !missing.isEmpty else { return }
        try insert(
            entry.record, op: .update, baseVersion: record.version, dataText: try missing.jsonText(),
            parents: Set(entry.parents))
    }

    /// The server holds the change: adopt its id, version and time.
    /// `dataDeferred`: `record.data` is still to be read from `dataText`,
    /// which the common case (`adoptConfirmedCopy`) stores as it is.
    private func confirm(_ entry: OutboxEntry, record: WireRecord?, dataText: String? = nil, dataDeferred: Bool = false) throws {
        if try adoptConfirmedCopy(entry, record, dataText: dataText) { return }
        var record = record
        if dataDeferred, let dataText {
            guard case .some(.some(let data)) = try? MutationResult.readObject(dataText) else {
                throw OutboxError.unreadableRecordData(seq: entry.seq ?? 0)
            }
            record?.data = data
        }
        guard var row = try tables.load(entry.record.collection, entry.record.uuid) else { return }
        let remaining = try queuedRows(for: entry.record)
        if entry.op == .delete || record?.deleted == true {
            // The delete reached the server; the local tombstone can go.
            if remaining.isEmpty || row.deleted {
                try table.removeAll(of: entry.record)
                try tables.remove(entry.record.collection, entry.record.uuid)
            }
            return
        }
        row.onServer = true
        if let record {
            row.serverID = record.id
            row.serverVersion = record.version
            row.serverUpdatedAt = record.updatedAt
            // The server keeps the time this device sent; a record from an
            // older server (none kept) keeps the local one.
            row.deviceTime = record.deviceTime ?? row.deviceTime
            row.owner = record.owner
            row.team = record.team
            // Later never-sent edits were made on top of this one: condition
            // them on the version this write produced, not the one before it.
            // Most confirmed changes have none: the statement is skipped then.
            if remaining.contains(where: { $0.seq == nil && $0.op != .create }) {
                try table.rebase(entry.record, on: record.version)
            }
        }
        if remaining.isEmpty {
            if let data = record?.data { row.data = data }
            row.syncState = .synced
            row.baseVersion = nil
            row.rejection = nil
        } else {
            row.syncState = .pending
            row.baseVersion = row.serverVersion
        }
        try tables.save(row)
    }

    /// The common confirmation, in one statement: a create or update the
    /// server applied, answered with its record, of a live row with nothing
    /// else queued. The row becomes the server's copy, as the general path
    /// below would leave it, without being read, parsed and written back
    /// whole. Returns false (nothing written) when the row has other entries
    /// queued, is deleted here or is absent: the general path decides those.
    /// `dataText`, when given, is `record.data` as the server wrote it: stored
    /// as it is (about a third of settling was writing the parsed data out again).
    private func adoptConfirmedCopy(_ entry: OutboxEntry, _ record: WireRecord?, dataText: String?) throws -> Bool {
        guard entry.op != .delete, let record, !record.deleted, let data = record.data else { return false }
        return try RecordTable(entry.record.collection, connection).adoptConfirmedCopy(
            entry.record.uuid, record, data: try tables.payloads.stored(try dataText ?? data.jsonText()))
    }

    /// The server copy prevails; the lost edit goes into a conflict report.
    private func conflict(_ entry: OutboxEntry, serverRecord: WireRecord?, fields: [String] = []) throws -> ConflictReport {
        // Later never-sent edits of the record were built on the edit that
        // lost: they lose too, and travel in the same report.
        var localChange = entry.data
        var op = entry.op
        for later in try queuedRows(for: entry.record) where later.seq == nil {
            if later.op == .delete {
                op = .delete
            } else if let patch = try later.data() {
                var merged = localChange ?? [:]
                for (key, value) in patch { merged[key] = value }
                localChange = merged
            }
            try table.remove(later.entry)
        }
        let stillQueued = try !queuedRows(for: entry.record).isEmpty
        if let serverRecord, !serverRecord.deleted, let data = serverRecord.data {
            if var row = try tables.load(entry.record.collection, entry.record.uuid) {
                row.data = data
                row.serverID = serverRecord.id
                row.serverVersion = serverRecord.version
                row.serverUpdatedAt = serverRecord.updatedAt
                row.owner = serverRecord.owner
                row.team = serverRecord.team
                row.onServer = true
                row.deleted = false
                row.baseVersion = nil
                row.rejection = nil
                row.syncState = stillQueued ? .pending : .synced
                try tables.save(row)
            }
        } else if !stillQueued {
            try tables.remove(entry.record.collection, entry.record.uuid)
        }
        let now = ServerTimestamp(clock.now())
        let id = try ConflictLog(connection: connection, payloads: tables.payloads).insert(
            entry.record, mutationID: entry.mutationID, op: op, localChange: try localChange?.jsonText(),
            serverRecord: try serverRecord.map { String(decoding: try WireCoding.encode($0), as: UTF8.self) }, detectedAt: now,
            fields: fields.isEmpty ? nil : fields)
        return ConflictReport(
            id: id, record: entry.record, mutationID: entry.mutationID, op: op,
            localChange: localChange, serverRecord: serverRecord, detectedAt: now.date, fields: fields)
    }

    /// Entries the server will never take as they are, found without a
    /// per-mutation result: the single mutation left when a whole-request
    /// refusal was narrowed down, or an entry whose retry budget is spent.
    /// Each becomes `rejected` like a refused result (editable, deletable),
    /// and the rest of the queue goes on. Safe for entries with a seq: a
    /// request refused whole applied nothing, so the server holds none.
    func rejectLocally(_ entries: [OutboxEntry], code: String, message: String) throws -> [RejectedChange] {
        var rejected: [RejectedChange] = []
        try connection.transaction {
            for entry in entries {
                try table.remove(entry.entry)
                let rejection = Rejection(code: code, errors: [:], op: entry.op, message: message)
                try reject(entry, rejection)
                rejected.append(RejectedChange(record: entry.record, mutationID: entry.mutationID, rejection: rejection))
            }
        }
        return rejected
    }

    /// Refused for good: the record shows its field errors and stays editable.
    private func reject(_ entry: OutboxEntry, _ rejection: Rejection) throws {
        guard var row = try tables.load(entry.record.collection, entry.record.uuid) else { return }
        let later = try queuedRows(for: entry.record).filter { $0.seq == nil }
        if later.contains(where: { $0.op == .delete }) {
            // The person deleted the record since: honour that.
            if !row.onServer {
                try table.removeAll(of: entry.record)
                try tables.remove(entry.record.collection, entry.record.uuid)
            } else {
                for other in later where other.op != .delete {
                    try table.remove(other.entry)
                }
            }
            return
        }
        // Later edits are already in the row's data; the next edit of the
        // rejected record sends the whole of it again.
        for other in later {
            try table.remove(other.entry)
        }
        row.syncState = try queuedRows(for: entry.record).isEmpty ? .rejected : .pending
        row.rejection = rejection
        if entry.op == .delete { row.deleted = false }
        try tables.save(row)
    }

    /// Sets a record's state from what remains queued for it.
    func refreshState(_ record: RecordReference) throws {
        guard var row = try tables.load(record.collection, record.uuid) else { return }
        let queued = try !queuedRows(for: record).isEmpty
        let state: SyncState = queued ? .pending : (row.rejection == nil ? .synced : .rejected)
        if row.syncState != state {
            row.syncState = state
            try tables.save(row)
        }
    }
}
