import Foundation
import OutpostCore

extension Outbox {
    /// The server proved (`409 client_behind`) that it applied none of
    /// `seqs` under those numbers: it holds other mutations for them, because
    /// this database was restored from a backup or copied to another device.
    /// Exactly those entries get new seqs above both `serverLastSeq` and
    /// anything this client handed out, in their old order, durably, and the
    /// batch ends; the next one resends them. No other entry is renumbered:
    /// only this proof makes renumbering safe.
    func renumber(_ batch: PushBatch, seqs: [Int64], serverLastSeq: Int64) throws -> Int {
        guard isLeased(batch) else { throw OutboxError.notInFlight }
        defer { dropLease(batch) }
        let listed = Set(seqs)
        let carried = Set(batch.entries.compactMap(\.seq))
        guard listed.isSubset(of: carried), !listed.isEmpty else {
            throw OutboxError.renumberingUnknownSeqs(seqs.filter { !carried.contains($0) })
        }
        let entries = batch.entries.filter { $0.seq.map(listed.contains) ?? false }.sorted { $0.seq! < $1.seq! }
        try connection.transaction {
            var next = max(try lastSeq(), serverLastSeq)
            for entry in entries {
                next += 1
                try table.renumber(entry.entry, from: entry.seq!, to: next)
            }
            try setLastSeq(next)
            try resolveDoubtsAfterClientBehind()
            try stopSending(batch)
        }
        return entries.count
    }
}
