import Foundation
import OutpostCore
import OutpostSQLite

/// The durable queue of local changes.
///
/// Every method runs on the store's serial owner and inside the store's
/// transactions, so a record write and its outbox entry commit together.
///
/// Two facts decide everything here:
/// - `seq` is written durably when an entry is first put into a push. From
///   then on the server may hold the entry, so it is never merged with a
///   later edit, never cancelled, never renumbered: a later edit is a new
///   entry, a delete after a sent create is a server delete.
/// - The in-flight batch (a request this process is waiting on) is kept in
///   memory only. After a restart nothing is in flight; entries with a seq
///   are simply sent again with the same seq, and the server dedupes them.
final class Outbox {
    let connection: SQLiteConnection
    let tables: RecordTables
    /// Attachments a change may wait for, and upload again on `missing_attachment`.
    let attachments: AttachmentQueue
    let ids: any IDGenerator
    let clock: any WallClock

    /// Batches handed out and not yet settled, released or given back, in
    /// the order they go to the server: the push this process is waiting on,
    /// and at most one taken while it was out (`takeBatch(after:)`), sent
    /// only once the first is answered. No other batch is handed out
    /// meanwhile: a later seq reaching the server before an earlier one would
    /// make the earlier one look like a duplicate.
    var leases: [PushBatch] = []

    /// The push this process is waiting on (the first lease).
    var inFlight: PushBatch? { leases.first }

    func isLeased(_ batch: PushBatch) -> Bool { leases.contains { $0.id == batch.id } }

    /// Forgets a batch's lease (whatever became of it).
    func dropLease(_ batch: PushBatch) { leases.removeAll { $0.id == batch.id } }

    /// `tables`: the store's record tables, which settlement and repairs
    /// update beside the queue in the same transactions.
    init(connection: SQLiteConnection, tables: RecordTables, attachments: AttachmentQueue, ids: any IDGenerator, clock: any WallClock) {
        self.connection = connection
        self.tables = tables
        self.attachments = attachments
        self.ids = ids
        self.clock = clock
    }

    /// The queue's table, where every statement on it lives.
    var table: OutboxTable { OutboxTable(connection: connection) }

    // MARK: Reading

    func rows(where condition: String = "1", _ values: [SQLiteValue] = [], order: String = "entry", limit: Int? = nil)
        throws -> [OutboxRow]
    {
        // A damaged entry is stepped over and logged (takeBatch then takes it
        // out of the queue): one bad row never stops the others.
        try table.select(where: condition, values, order: order, limit: limit) { [payloads = tables.payloads, damage = tables.damage] row in
            try damage.tolerating { try OutboxRow(row, payloads: payloads) }
        }.compactMap { $0 }
    }

    /// Takes damaged entries out of the queue and queues the record's
    /// whole current state in their place, read from the record row itself
    /// (the device's own copy, not a guess): a create when the server never
    /// had it, an update of every field when it did, a delete when it is
    /// deleted here. The damaged row is kept in `kv` for whoever
    /// investigates. A record whose row cannot be read either is left as
    /// the store reports it (``LocalStore/damagedRows()``).
    func quarantineDamagedEntries() throws {
        for error in tables.damage.all {
            guard case .damagedRow(let damagedTable, let key, let problem) = error, damagedTable == "outbox",
                let entry = Int64(key.dropFirst("entry ".count))
            else { continue }
            let raw = try table.raw(entry)
            tables.damage.clear(damagedTable, key)
            guard let raw else { continue }
            try setKV(
                "damaged.outbox.\(entry)",
                "\(problem) | \(raw.collection) \(raw.uuid) \(raw.op) seq \(raw.seq.map(String.init) ?? "none") | \(raw.data.prefix(2000))")
            try table.remove(entry)
            guard let uuid = UUID.fromWire(raw.uuid), (try? tables.exists(raw.collection, uuid)) == true,
                let row = try? tables.load(raw.collection, uuid)
            else { continue }
            let record = RecordReference(collection: raw.collection, uuid: uuid)
            // Never-sent entries of the record are replaced by the one below;
            // sent ones stay (the server may hold them) and go first.
            try table.removeUnsent(of: record)
            let remaining = try rows(for: record)
            let parents = Set(raw.parents.split(separator: " ").compactMap(RecordReference.init(text:)))
            // A sent create (this damaged one included: it had a seq) may be
            // on the server though its answer never came.
            let mayBeOnServer = row.onServer || remaining.contains { $0.op == .create } || (raw.seq != nil && raw.op == "create")
            if row.deleted {
                guard mayBeOnServer else {
                    try tables.remove(record.collection, record.uuid)
                    continue
                }
                try insert(record, op: .delete, baseVersion: nil, dataText: nil, parents: [])
            } else if row.onServer || remaining.contains(where: { $0.op == .create }) {
                // Every field, unconditionally: the damaged change's base is
                // unknown. (After a sent create still queued, an update: one
                // record never has two creates in the queue, which a later
                // delete would take for a never-sent one and cancel.)
                try insert(record, op: .update, baseVersion: nil, dataText: try row.data.jsonText(), parents: parents)
            } else {
                // Not known to be on the server: a create. If the damaged one
                // was sent and did arrive, this one is answered `duplicate`
                // (same client, same uuid) and what that lacks is sent as an update.
                try insert(record, op: .create, baseVersion: nil, dataText: try row.data.jsonText(), parents: parents)
                if raw.seq != nil && raw.op == "create" { try markMayBeOnServer(record) }
            }
            try tables.setState(record.collection, record.uuid, .pending)
        }
    }

    func rows(for record: RecordReference) throws -> [OutboxRow] {
        try rows(where: OutboxTable.ofRecord, [.text(record.collection), .text(record.uuid.wireText)])
    }

    /// The record's entries for a local write to build on. A damaged entry
    /// among them is repaired first: a write that stepped over it would take
    /// the record's queue for what it is not (a delete would see nothing
    /// queued and drop a record whose create was sent).
    func queuedRows(for record: RecordReference) throws -> [OutboxRow] {
        let queued = try rows(for: record)
        guard !tables.damage.all.isEmpty else { return queued }
        try quarantineDamagedEntries()
        return try rows(for: record)
    }

    // MARK: Enqueueing (with coalescing between never-sent entries)

    /// Queues a create of a new record (`dataText`: the data's JSON, when the caller already wrote it).
    func enqueueCreate(_ record: RecordReference, data: JSONObject, dataText: String? = nil, references: [String: String]) throws {
        try insert(
            record, op: .create, baseVersion: nil, dataText: try dataText ?? data.jsonText(), parents: Self.parents(of: data, references))
    }

    /// Queues a partial update; merges into the last entry when that one was never sent.
    /// `newDataText` is `newData`'s JSON when the caller wrote it already;
    /// `oldDataText` the record's data as stored before this update.
    func enqueueUpdate(
        _ record: RecordReference, patch: JSONObject, baseVersion: Int64?, newData: JSONObject, newDataText: String? = nil,
        oldDataText: String? = nil, references: [String: String]
    ) throws {
        let parents = Self.parents(of: newData, references)
        if let tail = try queuedRows(for: record).last, tail.seq == nil, let tailText = tail.dataText {
            switch tail.op {
            case .create:
                // create + update = one create with the merged fields: the
                // record's new data, unless the create held something else.
                // One holding the record's stored text (as a create does
                // until the server answers) is known to without reading it.
                let holdsRecord = tailText == oldDataText
                let merged = holdsRecord ? newData : (try tail.data() ?? [:]).applyingPatch(patch)
                let text = holdsRecord || merged == newData ? newDataText : nil
                try rewrite(tail, op: .create, baseVersion: nil, data: merged, dataText: text, parents: parents)
                return
            case .update:
                // update + update = one update keeping the FIRST base_version:
                // the version the server issued, never one the device made up.
                var merged = try tail.data() ?? [:]
                for (key, value) in patch { merged[key] = value }
                try rewrite(tail, op: .update, baseVersion: tail.baseVersion, data: merged, parents: parents)
                return
            case .delete:
                break
            }
        }
        try insert(record, op: .update, baseVersion: baseVersion, dataText: try patch.jsonText(), parents: parents)
    }

    /// Queues a delete. Returns false when it cancelled a create that was
    /// never sent: the server never saw the record, so nothing is queued and
    /// the caller removes the row. (Unless this database is a copy whose
    /// other timeline sent it: `DoubtfulCreates.swift`.)
    func enqueueDelete(_ record: RecordReference, baseVersion: Int64?) throws -> Bool {
        if let tail = try queuedRows(for: record).last, tail.seq == nil {
            switch tail.op {
            case .create:
                if try takeMayBeOnServer(record) {
                    // An earlier send of this create may have arrived: the
                    // server must hear of the delete.
                    try rewrite(tail, op: .delete, baseVersion: nil, data: nil, parents: [])
                    return true
                }
                try table.remove(tail.entry)
                try noteCancelledCreate(record)
                return false
            case .update:
                // update + delete = one delete, still conditioned on the first base.
                try rewrite(tail, op: .delete, baseVersion: tail.baseVersion, data: nil, parents: [])
                return true
            case .delete:
                return true
            }
        }
        try insert(record, op: .delete, baseVersion: baseVersion, dataText: nil, parents: [])
        return true
    }

    func insert(
        _ record: RecordReference, op: MutationOp, baseVersion: Int64?, dataText: String?, parents: Set<RecordReference>
    ) throws {
        try table.insert(
            mutationID: ids.next(), record: record, op: op, baseVersion: baseVersion, data: try tables.payloads.stored(dataText),
            parents: OutboxRow.parentsText(parents), queuedAt: ServerTimestamp(clock.now()).rawValue)
    }

    private func rewrite(
        _ row: OutboxRow, op: MutationOp, baseVersion: Int64?, data: JSONObject?, dataText: String? = nil,
        parents: Set<RecordReference>
    ) throws {
        precondition(row.seq == nil, "an entry that was sent is never rewritten")
        // New content, new mutation id: a mutation id names one content. A
        // copy of this database (a backup put back, a copied profile) may
        // hold the entry as it was and send it; the server applies an id once.
        // queued_at follows: the change now holds the latest edit, made at this time.
        try table.rewrite(
            row.entry, mutationID: ids.next(), op: op, baseVersion: baseVersion,
            data: try tables.payloads.stored(try dataText ?? data?.jsonText()), parents: OutboxRow.parentsText(parents),
            queuedAt: ServerTimestamp(clock.now()).rawValue)
    }

    /// The records a record's data points at through its reference fields.
    static func parents(of data: JSONObject, _ references: [String: String]) -> Set<RecordReference> {
        var parents: Set<RecordReference> = []
        for (field, collection) in references {
            if let text = data[field]?.stringValue, let uuid = UUID.fromWire(text) {
                parents.insert(RecordReference(collection: collection, uuid: uuid))
            }
        }
        return parents
    }

    // MARK: Inspection

    func entries() throws -> [OutboxEntry] {
        try rows().map { $0.entryValue() }
    }

    func summary() throws -> OutboxSummary {
        // Counted by SQLite, and each count from an index, not the rows: the
        // status is published after every settled push, with a long queue
        // still waiting (reading a 10,000-entry queue twice per push was a
        // tenth of a drain's device time).
        let inFlight = leases.flatMap { $0.entries.map { String($0.entry) } }.joined(separator: ",")
        let total = try table.count()
        let sending = try table.count(in: inFlight)
        let checking = try table.checkingCount(notIn: inFlight)
        // An entry whose last send surely did not arrive is pending, not "checking".
        return OutboxSummary(
            pending: total - sending - checking, sending: sending, awaitingConfirmation: checking, held: try heldEntries().count,
            rejected: 0, oldestChangeAt: try table.headQueuedAt().flatMap { ServerTimestamp(rawValue: $0).date })
    }

    /// Never-sent entries whose parent's create the server refused.
    func heldEntries() throws -> [HeldEntry] {
        var held: [HeldEntry] = []
        for row in try rows(where: OutboxStatusQueries.heldCandidates) {
            for parent in row.parents where try isRefused(parent) {
                held.append(HeldEntry(entry: row.entryValue(), refusedParent: parent))
                break
            }
        }
        return held
    }

    /// A parent the server refused to create, with no create waiting to fix it.
    func isRefused(_ parent: RecordReference) throws -> Bool {
        guard let row = try? tables.load(parent.collection, parent.uuid) else { return false }
        guard row.syncState == .rejected, !row.onServer else { return false }
        return try !table.hasCreate(of: parent)
    }
}
