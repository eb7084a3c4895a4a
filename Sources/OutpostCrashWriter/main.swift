// A child process for the crash tests: writes through the real store as fast
// as it can, acknowledging each committed change on stdout, until it is
// killed with SIGKILL. The test then reopens the database and checks that
// every acknowledged change is there with its outbox entry.
//
// Usage: OutpostCrashWriter <database path> <seed>
// Lines: "C <uuid>" created, "U <uuid> <n>" updated to n, "D <uuid>" deleted,
//        "S <seq>" a seq handed out, "R" the store is open. Before each write
//        the same line in lowercase announces it: a kill between the commit
//        and the acknowledgement leaves an announced, unacknowledged write,
//        which may or may not have committed.
import Foundation
import Outpost
import OutpostCore

struct Counter: SyncRecord {
    static let collection = "counters"
    var n: Int
}

func acknowledge(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let seed = UInt64(arguments[2]) else {
    FileHandle.standardError.write(Data("usage: OutpostCrashWriter <database path> <seed>\n".utf8))
    exit(2)
}

var random = SeededRandom(seed: seed)
let store = try LocalStore(path: arguments[1], collections: [Counter.descriptor])
var live = try await store.query(Counter.self).map { ($0.uuid, $0.value.n) }
var version: Int64 = Int64(Date().timeIntervalSince1970 * 1000)
acknowledge("R")

while true {
    let roll = random.next() % 100
    if roll < 45 || live.isEmpty {
        let id = UUID()
        acknowledge("c \(id.wireText)")
        try await store.create(Counter(n: 0), uuid: id)
        live.append((id, 0))
        acknowledge("C \(id.wireText)")
    } else if roll < 75 {
        let index = Int(random.next() % UInt64(live.count))
        let (id, n) = live[index]
        acknowledge("u \(id.wireText) \(n + 1)")
        try await store.update(Counter.self, id) { $0.n = n + 1 }
        live[index].1 = n + 1
        acknowledge("U \(id.wireText) \(n + 1)")
    } else if roll < 85 {
        let index = Int(random.next() % UInt64(live.count))
        let id = live.remove(at: index).0
        acknowledge("d \(id.wireText)")
        try await store.delete(Counter.self, id)
        acknowledge("D \(id.wireText)")
    } else if let batch = try await store.takePushBatch(limit: 20) {
        for mutation in batch.request.mutations { acknowledge("S \(mutation.seq)") }
        if random.next() % 2 == 0 {
            // Play the server: every mutation applied.
            let results = batch.request.mutations.map { mutation -> MutationResult in
                version += 1
                let record = WireRecord(
                    collection: mutation.collection, uuid: mutation.uuid, id: version, version: version,
                    updatedAt: ServerTimestamp(Date()), deleted: mutation.op == .delete, owner: "u", team: "t",
                    data: mutation.op == .delete ? nil : (mutation.data ?? [:]))
                return MutationResult(seq: mutation.seq, id: mutation.id, status: .applied, record: record)
            }
            _ = try await store.settle(
                batch,
                with: PushResponse(results: results, lastSeq: batch.request.mutations.last!.seq, serverTime: ServerTimestamp(Date())))
        } else {
            try await store.release(batch, failure: .unknownOutcome("no answer"))
        }
    }
}

