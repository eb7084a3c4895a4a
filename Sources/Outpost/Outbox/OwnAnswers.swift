import Foundation
import OutpostCore

/// How far this store holds the answers of its own changes: the highest
/// seq `held` such that every seq up to it was answered by the server and
/// settled here. A pull sends it (with the client id), and the server
/// leaves out the records whose current state those changes wrote: after
/// a push of 10,000 captures, the pull no longer downloads them again.
///
/// Counted from the answers, never from what the queue no longer holds:
/// an entry can leave the queue unanswered (refused whole and rejected
/// here, or damaged), and another copy of this database (a restored
/// backup, a profile copied to another computer: the same client id) may
/// then have the server apply a different change under that seq. So
/// `held` only moves through seqs answered here, in order; answers that
/// come ahead of an earlier seq wait in `above`. A seq at `held + 1` that
/// left the queue unanswered will never be answered: from then on this
/// store says it holds nothing more (`stopped`), and its pulls bring its
/// own writes as before. Renumbering after `client_behind` jumps over the
/// other copy's seqs, which this store never answers: it stops there too.
/// A store made before this was kept (no `held` yet, seqs already given
/// out) stops at once.
extension Outbox {
    static let ownHeldKey = "outbox.own_answers.held"
    static let ownAboveKey = "outbox.own_answers.above"
    static let ownStoppedKey = "outbox.own_answers.stopped"

    /// The seq through which this store holds its own answers (0: none).
    /// Still true once stopped: only no longer moving.
    func ownAnswersHeld() throws -> Int64 {
        try kvInt(Self.ownHeldKey)
    }

    /// Notes that the server answered `seqs` and their answers were settled
    /// (inside the settling transaction).
    func noteAnswered(_ seqs: [Int64]) throws {
        guard try kv(Self.ownStoppedKey) != "1" else { return }
        var held = try kvInt(Self.ownHeldKey)
        var above = Set((try kv(Self.ownAboveKey) ?? "").split(separator: ",").compactMap { Int64($0) })
        above.formUnion(seqs.filter { $0 > held })
        while above.remove(held + 1) != nil { held += 1 }
        // The seq after `held` was given out, is not answered and is no
        // longer queued: it left unanswered and never will be answered.
        let next = held + 1
        if try next <= lastSeq(), try !holdsSeq(next) {
            try setKV(Self.ownStoppedKey, "1")
            above = []
        }
        try setKV(Self.ownHeldKey, String(held))
        try setKV(Self.ownAboveKey, above.sorted().map(String.init).joined(separator: ","))
    }

    private func holdsSeq(_ seq: Int64) throws -> Bool {
        try table.holds(seq: seq)
    }

    private func kvInt(_ key: String) throws -> Int64 {
        try kv(key).flatMap { Int64($0) } ?? 0
    }
}
