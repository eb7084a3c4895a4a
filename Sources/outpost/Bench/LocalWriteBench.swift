import Foundation
import Outpost
import OutpostCore
import OutpostSQLite
import OutpostTesting

/// local-write: creates and updates of ~300-byte records through the store
/// API (record + outbox entry in one transaction), against a bare SQLite
/// single-row insert transaction of the same records.
enum LocalWriteBench {
    struct Person: SyncRecord {
        static let collection = "people"
        var name: String
        var phone: String?
        var address: String
        var notes: String
        var section: Int
        var createdAt: String

        /// The benchmarks' record of ~300 bytes, typed.
        init(_ index: Int) {
            let fields = Bench.recordObject(index)
            name = fields["name"]?.stringValue ?? ""
            phone = fields["phone"]?.stringValue
            address = fields["address"]?.stringValue ?? ""
            notes = fields["notes"]?.stringValue ?? ""
            section = Int(fields["section"]?.intValue ?? 0)
            createdAt = fields["created_at"]?.stringValue ?? ""
        }
    }

    /// The store and its floor at one durability: a store write (record and
    /// queued change in one transaction) and a bare single-row insert
    /// transaction, each with its latencies.
    final class Side {
        let bare: SQLiteConnection
        let store: LocalStore
        var baseline: [Double] = []
        var latencies: [Double] = []
        var createLatencies: [Double] = []
        var updateLatencies: [Double] = []
        var created: [UUID] = []

        init(_ directory: TemporaryDirectory, _ name: String, durability: Durability) throws {
            bare = try SQLiteConnection(path: directory.path("bare-\(name).sqlite"), durability: durability)
            try bare.execute("CREATE TABLE t (uuid TEXT PRIMARY KEY, data TEXT NOT NULL)")
            store = try LocalStore(
                path: directory.path("device-\(name).sqlite"), collections: [Person.descriptor], durability: durability)
        }

        func bareInsert(_ text: String, _ ids: UUIDv7Generator) throws {
            let start = DispatchTime.now().uptimeNanoseconds
            _ = try bare.transaction { try bare.run("INSERT INTO t (uuid, data) VALUES (?, ?)", [.text(ids.next().wireText), .text(text)]) }
            baseline.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
        }

        func storeWrite(_ index: Int, _ person: Person) async throws {
            let start = DispatchTime.now().uptimeNanoseconds
            if index % 2 == 0 || created.isEmpty {
                created.append(try await store.create(person))
            } else {
                let target = created[index % created.count]
                try await store.update(Person.self, target) { $0.phone = "556-\(index)" }
            }
            let latency = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            latencies.append(latency)
            if index % 2 == 0 { createLatencies.append(latency) } else { updateLatencies.append(latency) }
        }

        func close() async {
            bare.close()
            await store.close()
        }
    }

    static func run(operations: Int) async throws -> BenchResult {
        let directory = try TemporaryDirectory(prefix: "outpost-bench")
        // What the product promises: every write on stable storage when it
        // returns (its floor too: a bare insert that survives a power loss).
        let durable = try Side(directory, "durable", durability: .powerLoss)
        // The same with commits that survive a process crash only: what
        // durability costs, measured beside it.
        let crashOnly = try Side(directory, "crash-only", durability: .processCrash)
        // Made before the clock starts, for both.
        let people = (0..<operations).map(Person.init)
        let texts = (0..<operations).map(Bench.recordData)
        let ids = UUIDv7Generator()
        // The four are interleaved, each first in turn, so that whatever the
        // machine does meanwhile (another process, the kernel writing back
        // dirty pages, the clock speed changing) falls on all alike: run one
        // after the other, the ratio of their p99s moved by half from run to
        // run with the same binary.
        for index in 0..<operations {
            let sides = index % 2 == 0 ? [durable, crashOnly] : [crashOnly, durable]
            for side in sides {
                if index % 4 < 2 {
                    try side.bareInsert(texts[index], ids)
                    try await side.storeWrite(index, people[index])
                } else {
                    try await side.storeWrite(index, people[index])
                    try side.bareInsert(texts[index], ids)
                }
            }
        }
        await durable.close()
        await crashOnly.close()
        let latencies = durable.latencies
        let baseline = durable.baseline
        let p99 = Bench.percentile(latencies, 99)
        let baseP99 = Bench.percentile(baseline, 99)
        var result = BenchResult(
            name: "local-write", figure: p99 * 1000, unit: "ms (p99)", baseline: baseP99 * 1000,
            baselineLabel: "bare SQLite single-row insert transaction that survives a power loss, p99", ratio: p99 / baseP99,
            ratioMeaning: "store write p99 / bare insert p99 (both durable)", target: "p99 at most 2x", met: p99 / baseP99 <= 2)
        result.details = [
            "operations": Double(operations), "p50_ms": Bench.percentile(latencies, 50) * 1000,
            "baseline_p50_ms": Bench.percentile(baseline, 50) * 1000,
            "create_p50_ms": Bench.percentile(durable.createLatencies, 50) * 1000,
            "create_p99_ms": Bench.percentile(durable.createLatencies, 99) * 1000,
            "update_p50_ms": Bench.percentile(durable.updateLatencies, 50) * 1000,
            "update_p99_ms": Bench.percentile(durable.updateLatencies, 99) * 1000,
            // The slowest writes: those that checkpointed. The bare insert
            // does so every 1,000 WAL pages; the store in the pauses between
            // writes, and past 4,000 pages when there is none (as here):
            // rarer, longer stalls, shown rather than hidden by the p99.
            "p999_ms": Bench.percentile(latencies, 99.9) * 1000, "max_ms": (latencies.max() ?? 0) * 1000,
            "baseline_p999_ms": Bench.percentile(baseline, 99.9) * 1000, "baseline_max_ms": (baseline.max() ?? 0) * 1000,
            // What durability costs, in the same run: the same writes with
            // commits that survive a process crash only.
            "crash_only_p50_ms": Bench.percentile(crashOnly.latencies, 50) * 1000,
            "crash_only_p99_ms": Bench.percentile(crashOnly.latencies, 99) * 1000,
            "crash_only_baseline_p50_ms": Bench.percentile(crashOnly.baseline, 50) * 1000,
            "crash_only_baseline_p99_ms": Bench.percentile(crashOnly.baseline, 99) * 1000,
        ]
        return result
    }
}
