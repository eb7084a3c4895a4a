package import Foundation
import OutpostCore

/// A push handed to the sync engine: entries with their seqs, ready to send.
package struct PushBatch: Sendable, Equatable {
    /// Identifies this hand-out; settling or releasing another batch is refused.
    package let id: UUID
    package let entries: [OutboxEntry]
    /// Entries not included because a parent's create was refused.
    package let held: [HeldEntry]
    /// The device this batch is sent as.
    let clientID: UUID
    /// The request's JSON, written when the batch is taken (for a batch
    /// taken ahead, while the push before it is on the wire), each entry's
    /// data spliced in as the text it was stored with.
    package let body: Data
    /// The seqs this hand-out gave entries that had none, so a batch taken
    /// ahead and never sent can be given back whole (`Outbox.giveBack`).
    var newSeqs: ClosedRange<Int64>? = nil

    /// Entries sent before whose outcome was never learnt; this push resends
    /// them with the same seq.
    package var resent: [OutboxEntry] { entries.filter { $0.attempts > 0 } }

    init(id: UUID, entries: [OutboxEntry], held: [HeldEntry], clientID: UUID, newSeqs: ClosedRange<Int64>?) {
        self.id = id
        self.entries = entries
        self.held = held
        self.clientID = clientID
        self.newSeqs = newSeqs
        body = Data(PushRequest.wireBytes(clientID: clientID, entries) { entry, out in entry.appendWire(to: &out) })
    }

    /// The request as values (what `body` says; for tests and tools).
    package var request: PushRequest {
        PushRequest(clientID: clientID, mutations: entries.compactMap { $0.mutation() })
    }
}

/// Why a push did not produce results, as far as the outbox needs to know.
package enum PushFailure: Sendable, Equatable {
    /// The request surely never reached the server (e.g. connection refused).
    case notSent(String)
    /// Sent, but no answer came: the server may or may not hold the entries.
    case unknownOutcome(String)
    /// The server said "not now" (429, 503, 5xx): does not use up the retry budget.
    case transient(String)
    /// The server refused the whole request (e.g. 400, 403): counts against the budget.
    case permanent(String)

    var consumesBudget: Bool {
        if case .permanent = self { return true }
        return false
    }

    /// Whether the server may have acted on the request.
    var outcomeUnknown: Bool {
        if case .unknownOutcome = self { return true }
        return false
    }

    var message: String {
        switch self {
        case .notSent(let text), .unknownOutcome(let text), .transient(let text), .permanent(let text): return text
        }
    }
}

extension Outbox {
    /// Takes the next batch: every entry already sent (in seq order, with the
    /// same seq and content), then never-sent entries in the order they were
    /// made, each given the next seq durably before this returns.
    ///
    /// Returns nil while a batch is in flight (a second flush sends nothing)
    /// or when nothing can be sent. Never-sent entries are skipped, keeping
    /// their place, when an earlier entry of the same record is not settled
    /// (its base version would be stale) or when a parent's create has not
    /// reached the server; a parent refused for good makes them held.
    ///
    /// A batch also stays under `maxBytes` of mutation text (one entry always
    /// goes, whatever its size): a request over the server's body limit is
    /// refused whole, so the count alone cannot size it.
    ///
    /// A never-sent change naming an attachment in `waitingFor` (one the
    /// server does not hold yet) waits, with its record's later changes and
    /// children, until the upload is done.
    func takeBatch(clientID: UUID, limit: Int, maxBytes: Int = .max, waitingFor: Set<String> = []) throws -> PushBatch? {
        guard leases.isEmpty else { return nil }
        // A damaged entry met while choosing means its record's queue is not
        // what it seemed (a later edit may stand alone): the choice is rolled
        // back, the entry repaired, and the batch chosen again.
        for _ in 0..<8 {
            do {
                return try chooseBatch(clientID: clientID, limit: limit, maxBytes: maxBytes, waitingFor: waitingFor)
            } catch is DamageFoundWhileChoosing {
                continue
            }
        }
        return try chooseBatch(clientID: clientID, limit: limit, maxBytes: maxBytes, waitingFor: waitingFor, repairing: false)
    }

    private struct DamageFoundWhileChoosing: Error {}

    /// The batch after `lease`, taken while `lease` is on the wire so the
    /// device has it ready the moment the answer comes (the engine sends it
    /// only then, and settles `lease` while it is out). It holds what a batch
    /// taken after settling `lease` could hold and nothing that depends on
    /// how `lease` ends: no entry of a record `lease` carries (its settlement
    /// sets their base version) and no child of a create in `lease` (it waits
    /// for the create to be confirmed). Nil when `lease` is not the only
    /// batch out, when damage waits for repair, or when nothing can go.
    func takeBatch(after lease: PushBatch, clientID: UUID, limit: Int, maxBytes: Int = .max, waitingFor: Set<String> = [])
        throws -> PushBatch?
    {
        guard leases.count == 1, leases[0].id == lease.id, tables.damage.all.isEmpty else { return nil }
        do {
            return try chooseBatch(clientID: clientID, limit: limit, maxBytes: maxBytes, waitingFor: waitingFor, behind: lease)
        } catch is DamageFoundWhileChoosing {
            // Rolled back: the next batch is taken the ordinary way, after repair.
            return nil
        }
    }

    /// Gives back a batch taken ahead that never left the device (the push
    /// before it failed, or the cycle ended first): as if it had never been
    /// taken. The seqs it gave out are withdrawn, since no server saw them;
    /// entries that were already sent before keep theirs.
    func giveBack(_ batch: PushBatch) throws {
        guard isLeased(batch) else { throw OutboxError.notInFlight }
        // Dropped even when the update below fails: entries that keep seqs
        // are resent as they are, which is safe for seqs no server saw.
        defer { dropLease(batch) }
        try connection.transaction {
            if let fresh = batch.newSeqs, try lastSeq() == fresh.upperBound {
                try table.clearSeqs(fresh)
                try setLastSeq(fresh.lowerBound - 1)
            }
            try stopSending(batch)
        }
    }

    private func chooseBatch(
        clientID: UUID, limit: Int, maxBytes: Int, waitingFor: Set<String>, repairing: Bool = true, behind lease: PushBatch? = nil
    ) throws -> PushBatch? {
        let limit = max(1, min(limit, PushRequest.maximumMutations))
        var chosen: [OutboxRow] = []
        var bytes = 0
        func fits(_ row: OutboxRow) -> Bool {
            guard chosen.count < limit else { return false }
            let size = row.wireSizeEstimate
            guard chosen.isEmpty || bytes + size <= maxBytes else { return false }
            bytes += size
            return true
        }
        var held: [HeldEntry] = []
        // Records with an entry earlier in the queue that is not in this batch
        // (those of a batch still out, first).
        var blocked = Set(lease?.entries.map(\.record) ?? [])
        let out = Set(lease?.entries.map(\.entry) ?? [])
        var newSeqs: ClosedRange<Int64>?
        // Records with an entry in this batch; a second entry would carry a stale base.
        var included: Set<RecordReference> = []
        // Records whose create is in this batch: children may follow them.
        var createdInBatch: Set<RecordReference> = []

        if repairing && !tables.damage.all.isEmpty {
            // Damage met by earlier reads (or the last attempt) is repaired first.
            try connection.transaction { try quarantineDamagedEntries() }
        }
        let damageBefore = tables.damage.all.count
        let batch: [OutboxRow] = try connection.transaction {
            var lastSeq = try self.lastSeq()
            // Already-sent entries go first, in seq order, and are never skipped:
            // the server must see seqs in increasing order. Those of the batch
            // still out are all of them while a queue drains: they are
            // counted by their ids, not read and parsed only to be passed over.
            let sentElsewhere = try table.sentEntries().contains { !out.contains($0) }
            for row in try sentElsewhere ? rows(where: OutboxTable.sent, order: OutboxTable.seqOrder) : [] where !out.contains(row.entry) {
                // An already-sent entry left for a later batch means this one
                // is full, so no new (higher) seq can overtake it.
                guard fits(row) else {
                    bytes = .max
                    break
                }
                chosen.append(row)
                included.insert(row.record)
                if row.op == .create { createdInBatch.insert(row.record) }
            }
            // Never-sent entries are read in chunks of about what the batch
            // still has room for: a long offline queue is not loaded (and its
            // payloads parsed) whole, nor twice what one batch takes.
            var unsent: [OutboxRow] = []
            // The never-sent entries chosen, in order: they take the seqs
            // after `lastSeq`, written in one statement once the batch is full.
            var numbered: [Int64] = []
            var after: Int64 = 0
            var exhausted = false
            func nextUnsent() throws -> OutboxRow? {
                if unsent.isEmpty && !exhausted {
                    let chunk = min(1000, max(64, limit - chosen.count))
                    unsent = try rows(where: OutboxTable.unsentAfter, [.integer(after)], limit: chunk)
                    exhausted = unsent.count < chunk
                    unsent.reverse()
                }
                guard let row = unsent.popLast() else { return nil }
                after = row.entry
                return row
            }
            while chosen.count < limit, bytes < maxBytes, var row = try nextUnsent() {
                if blocked.contains(row.record) || included.contains(row.record) {
                    blocked.insert(row.record)
                    continue
                }
                var waiting =
                    try !waitingFor.isEmpty
                    && AttachedFile.all(in: row.data()).values.contains { waitingFor.contains($0.sha256) }
                for parent in row.parents where !waiting && !createdInBatch.contains(parent) {
                    if try isRefused(parent) {
                        held.append(HeldEntry(entry: row.entryValue(), refusedParent: parent))
                        waiting = true
                        break
                    }
                    if try hasUnsettledCreate(parent) {
                        waiting = true
                        break
                    }
                }
                if waiting {
                    blocked.insert(row.record)
                    continue
                }
                guard fits(row) else { break }
                lastSeq += 1
                newSeqs = (newSeqs?.lowerBound ?? lastSeq)...lastSeq
                row.seq = lastSeq
                numbered.append(row.entry)
                chosen.append(row)
                included.insert(row.record)
                if row.op == .create { createdInBatch.insert(row.record) }
            }
            if repairing && tables.damage.all.count > damageBefore { throw DamageFoundWhileChoosing() }
            if let first = newSeqs?.lowerBound {
                try table.number(numbered, from: first)
            }
            try setLastSeq(lastSeq)
            try tables.setStates(chosen.map(\.record), .sending)
            return chosen
        }
        guard !batch.isEmpty else { return nil }
        let pushBatch = PushBatch(
            id: ids.next(), entries: batch.map { $0.entryValue() }, held: held, clientID: clientID, newSeqs: newSeqs)
        leases.append(pushBatch)
        return pushBatch
    }

    private func hasUnsettledCreate(_ record: RecordReference) throws -> Bool {
        try table.hasCreate(of: record)
    }

    /// Gives back a batch whose push produced no results. Entries keep their
    /// seq and content and are resent first next time; nothing is removed.
    func release(_ batch: PushBatch, failure: PushFailure) throws {
        guard isLeased(batch) else { throw OutboxError.notInFlight }
        // Ended even when the update below fails: the entries keep their seqs
        // in the database, so a later batch resends them as they are.
        defer { dropLease(batch) }
        try connection.transaction {
            for entry in batch.entries {
                try table.noteFailure(
                    entry.entry, consumesBudget: failure.consumesBudget, message: failure.message,
                    outcomeUnknown: failure.outcomeUnknown)
            }
            try stopSending(batch)
        }
    }

    /// Records of a batch that ended without a settlement show `pending`
    /// again (a record whose state moved on meanwhile is left alone).
    func stopSending(_ batch: PushBatch) throws {
        for entry in batch.entries {
            try tables.setState(entry.record.collection, entry.record.uuid, .pending, from: .sending)
        }
    }

    // MARK: The durable seq counter

    static let lastSeqKey = "outbox.last_seq"

    /// The highest seq ever handed out by this client. Never goes backwards
    /// past a seq that left the device (see `giveBack`).
    func lastSeq() throws -> Int64 {
        try kv(Self.lastSeqKey).flatMap { Int64($0) } ?? 0
    }

    func setLastSeq(_ seq: Int64) throws {
        try setKV(Self.lastSeqKey, String(seq))
    }

    /// The store's `kv` table, as the queue keeps its own figures there.
    func kv(_ key: String) throws -> String? { try KeyValueTable(connection: connection).value(key) }

    func setKV(_ key: String, _ value: String) throws { try KeyValueTable(connection: connection).set(key, value) }
}

/// Misuse of the outbox's batch API by a sync engine.
package enum OutboxError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The batch settled or released is not the one in flight.
    case notInFlight
    /// The server answered a seq with a result for another record.
    case mismatchedResult(seq: Int64, sent: RecordReference, answered: RecordReference)
    /// The server asked to renumber seqs this batch did not send.
    case renumberingUnknownSeqs([Int64])
    /// The server answered a change with record data that is not one JSON
    /// object (found when settling needed its values).
    case unreadableRecordData(seq: Int64)

    package var description: String {
        switch self {
        case .notInFlight: return "This push batch is not the one in flight; it was already settled or released."
        case .mismatchedResult(let seq, let sent, let answered):
            return "The server answered change \(seq) (\(sent)) with a result for \(answered); the answer was not applied."
        case .renumberingUnknownSeqs(let seqs):
            return "The server asked to renumber changes \(seqs) that this push did not carry."
        case .unreadableRecordData(let seq):
            return "The server answered change \(seq) with record data that is not a JSON object; the answer was not applied."
        }
    }
}
