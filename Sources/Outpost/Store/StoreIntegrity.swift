import Foundation
import OutpostCore
import OutpostSQLite

extension LocalStore {
    /// Checks that the database is whole and that records and the outbox
    /// agree: every queued entry has its record, every record with unsent
    /// changes has its entry, every synced record has none, and no seq is
    /// above the durable counter. Returns one line per problem; empty when sound.
    ///
    /// Used after crash tests and simulations (invariants I1, I6).
    public func integrityProblems() throws -> [String] {
        try checkOpen()
        var problems: [String] = []
        let check = try connection.query("PRAGMA integrity_check") { $0.string(0) }
        if check != ["ok"] { problems.append("SQLite integrity_check: \(check.joined(separator: "; "))") }

        var queued: [RecordReference: [OutboxRow]] = [:]
        for row in try outbox.rows() { queued[row.record, default: []].append(row) }
        let lastSeq = try outbox.lastSeq()

        for (record, entries) in queued {
            guard registry.all.contains(where: { $0.name == record.collection }) else {
                problems.append("outbox entry for unregistered collection \(record)")
                continue
            }
            guard let row = try tables.load(record.collection, record.uuid) else {
                problems.append("outbox entries \(entries.map(\.entry)) have no record \(record)")
                continue
            }
            if row.syncState == .synced {
                problems.append("record \(record) is synced but has \(entries.count) queued entries")
            }
            if row.deleted && !entries.contains(where: { $0.op == .delete }) {
                problems.append("record \(record) is deleted locally but no delete is queued")
            }
            for entry in entries {
                if let seq = entry.seq, seq > lastSeq {
                    problems.append("entry \(entry.entry) has seq \(seq) above the counter \(lastSeq)")
                }
                if entry.op != .delete, entry.dataText == nil {
                    problems.append("entry \(entry.entry) (\(entry.op.rawValue)) has no data")
                }
            }
        }
        for descriptor in registry.all {
            try RecordTable(descriptor.name, connection).forEachUnsettled { uuid, state, deleted in
                let record = RecordReference(collection: descriptor.name, uuid: UUID.fromWire(uuid) ?? UUID())
                if queued[record] == nil {
                    problems.append("record \(record) is \(state)\(deleted ? " (deleted)" : "") but nothing is queued")
                }
            }
        }
        return problems.sorted()
    }
}
