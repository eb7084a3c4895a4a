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

    static func run(operations: Int) async throws -> BenchResult {
        let directory = try TemporaryDirectory(prefix: "outpost-bench")
        // Baseline: BEGIN; INSERT one row; COMMIT, with a prepared statement.
        let bare = try SQLiteConnection(path: directory.path("bare.sqlite"))
        try bare.execute("CREATE TABLE t (uuid TEXT PRIMARY KEY, data TEXT NOT NULL)")
        let store = try LocalStore(path: directory.path("device.sqlite"), collections: [Person.descriptor])
        // Made before the clock starts, for both.
        let people = (0..<operations).map(Person.init)
        let texts = (0..<operations).map(Bench.recordData)
        let ids = UUIDv7Generator()
        var baseline: [Double] = []
        var latencies: [Double] = []
        var createLatencies: [Double] = []
        var updateLatencies: [Double] = []
        var created: [UUID] = []

        func bareInsert(_ index: Int) throws {
            let start = DispatchTime.now().uptimeNanoseconds
            _ = try bare.transaction { try bare.run("INSERT INTO t (uuid, data) VALUES (?, ?)", [.text(ids.next().wireText), .text(texts[index])]) }
            baseline.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
        }
        func storeWrite(_ index: Int) async throws {
            let start = DispatchTime.now().uptimeNanoseconds
            if index % 2 == 0 || created.isEmpty {
                created.append(try await store.create(people[index]))
            } else {
                let target = created[index % created.count]
                try await store.update(Person.self, target) { $0.phone = "556-\(index)" }
            }
            let latency = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            latencies.append(latency)
            if index % 2 == 0 { createLatencies.append(latency) } else { updateLatencies.append(latency) }
        }
        // The two are interleaved, each first in turn, so that whatever the
        // machine does meanwhile (another process, the kernel writing back
        // dirty pages, the clock speed changing) falls on both alike: run one
        // after the other, the ratio of their p99s moved by half from run to
        // run with the same binary.
        for index in 0..<operations {
            if index % 4 < 2 {
                try bareInsert(index)
                try await storeWrite(index)
            } else {
                try await storeWrite(index)
                try bareInsert(index)
            }
        }
        bare.close()
        await store.close()
        let p99 = Bench.percentile(latencies, 99)
        let baseP99 = Bench.percentile(baseline, 99)
        var result = BenchResult(
            name: "local-write", figure: p99 * 1000, unit: "ms (p99)", baseline: baseP99 * 1000,
            baselineLabel: "bare SQLite single-row insert transaction, p99", ratio: p99 / baseP99,
            ratioMeaning: "store write p99 / bare insert p99", target: "p99 at most 2x", met: p99 / baseP99 <= 2)
        result.details = [
            "operations": Double(operations), "p50_ms": Bench.percentile(latencies, 50) * 1000,
            "baseline_p50_ms": Bench.percentile(baseline, 50) * 1000,
            "create_p50_ms": Bench.percentile(createLatencies, 50) * 1000, "create_p99_ms": Bench.percentile(createLatencies, 99) * 1000,
            "update_p50_ms": Bench.percentile(updateLatencies, 50) * 1000, "update_p99_ms": Bench.percentile(updateLatencies, 99) * 1000,
            // The slowest writes: those that checkpointed. The bare insert
            // does so every 1,000 WAL pages; the store in the pauses between
            // writes, and past 4,000 pages when there is none (as here):
            // rarer, longer stalls, shown rather than hidden by the p99.
            "p999_ms": Bench.percentile(latencies, 99.9) * 1000, "max_ms": (latencies.max() ?? 0) * 1000,
            "baseline_p999_ms": Bench.percentile(baseline, 99.9) * 1000, "baseline_max_ms": (baseline.max() ?? 0) * 1000,
        ]
        return result
    }
}
