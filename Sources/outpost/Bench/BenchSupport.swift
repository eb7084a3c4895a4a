import Foundation
import OutpostCore
import OutpostTesting
import OutpostSQLite
import OutpostServer

#if canImport(Glibc)
import Glibc
#endif

/// One benchmark's outcome: its figure, the baseline measured in the same
/// run, and their ratio (this machine is noisy; only ratios are quoted).
struct BenchResult: Codable {
    var name: String
    var figure: Double
    var unit: String
    var baseline: Double?
    var baselineLabel: String?
    /// figure / baseline for times (lower is better), or as stated in `ratioMeaning`.
    var ratio: Double?
    var ratioMeaning: String?
    var target: String
    var met: Bool?
    var details: [String: Double] = [:]
    var notes: [String] = []

    enum CodingKeys: String, CodingKey {
        case name, figure, unit, baseline, ratio, target, met, details, notes
        case baselineLabel = "baseline_label"
        case ratioMeaning = "ratio_meaning"
    }
}

enum Bench {
    /// Seconds taken by `body`, on the monotonic clock.
    static func time(_ body: () async throws -> Void) async rethrows -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        try await body()
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    static func percentile(_ values: [Double], _ p: Double) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        let index = min(sorted.count - 1, max(0, Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1))
        return sorted[index]
    }

    /// This process's peak resident memory, in MB.
    static func peakRSSMegabytes() -> Double {
        var usage = rusage()
        #if canImport(Darwin)
        getrusage(RUSAGE_SELF, &usage)
        return Double(usage.ru_maxrss) / 1_048_576  // bytes on macOS, KB on Linux
        #else
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_maxrss) / 1024
        #endif
    }

    /// CPU seconds (user and system) another process has used so far, in
    /// clock ticks of 10 ms.
    static func cpuSeconds(_ pid: pid_t) -> Double {
        #if canImport(Darwin)
        return ProcessTaskInfo.cpuSeconds(pid)
        #else
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let sample = statTicks(stat)
        else { return 0 }
        return sample.ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
        #endif
    }

    /// A process's or thread's name and user plus system clock ticks, from
    /// its `stat` line (`pid (name) state ...`, utime and stime the 14th and
    /// 15th fields: 12th and 13th after the name, which may hold spaces).
    static func statTicks(_ stat: String) -> (name: String, ticks: Double)? {
        guard let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")"), open < close else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (String(stat[stat.index(after: open)..<close]), user + system)
    }

    /// CPU seconds (user and system) this process has used so far, every thread's.
    static func ownCPUSeconds() -> Double { usageSeconds(children: false) }

    /// CPU seconds of the child processes this one has waited for (a `curl`).
    static func childrenCPUSeconds() -> Double { usageSeconds(children: true) }

    private static func usageSeconds(children: Bool) -> Double {
        var usage = rusage()
        #if canImport(Darwin)
        getrusage(children ? RUSAGE_CHILDREN : RUSAGE_SELF, &usage)
        #else
        getrusage(children ? RUSAGE_CHILDREN.rawValue : RUSAGE_SELF.rawValue, &usage)
        #endif
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    static var executable: String {
        #if os(Linux)
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        #else
        Bundle.main.executableURL!.resolvingSymlinksInPath().path
        #endif
    }

    /// A record of about 300 bytes, made deterministically from its index:
    /// every benchmark writes, pushes and downloads records of this shape.
    static func recordData(_ index: Int) -> String {
        (try? recordObject(index).jsonText()) ?? "{}"
    }

    /// `recordData`'s fields, as a store's `create` takes them.
    static func recordObject(_ index: Int) -> JSONObject {
        let streets = ["Via Roma", "Calle Mayor", "Rua Augusta", "Nevsky Prospekt", "Avenida Juárez"]
        let names = ["Lucía Romero", "Marco Bianchi", "Olga Petrova", "João Costa", "Ana Torres", "Ivan Sokolov"]
        let data: JSONObject = [
            "name": .string("\(names[index % names.count]) \(index)"),
            "phone": .string(String(format: "555-%07d", index)),
            "address": .string("\(streets[index % streets.count]) \(index % 300 + 1), interior \(index % 12)"),
            "notes": .string("Captured in the field during the census round \(index % 17); visit again in the morning if nobody answers."),
            "section": .int(Int64(index % 400)),
            "created_at": .string(ServerTimestamp(Date(timeIntervalSince1970: 1_780_000_000 + Double(index) * 7)).rawValue),
        ]
        return data
    }

    /// Fills a fresh server database with `count` people owned by `user`.
    ///
    /// Their uuids come from one generator, so the feed (in version order)
    /// carries them in key order. `mixedKeys` deals the same uuids out in a
    /// seeded random order instead, as a feed does whose records were made
    /// on many devices at different times.
    static func seedServer(
        _ database: any ServerDatabase, count: Int, user: String, team: String, client: String = "bench", idSeed: UInt64 = 1,
        mixedKeys: Bool = false
    ) throws {
        let generator = UUIDv7Generator.seeded(idSeed, clock: FixedClock())
        var uuids = (0..<count).map { _ in generator.next().wireText }
        if mixedKeys {
            var random = SeededRandom(seed: idSeed)
            uuids.shuffle(using: &random)
        }
        let now = ServerTimestamp(Date()).rawValue
        let batch = 500
        var next = 0
        while next < count {
            try database.write { sql in
                var versions = try FeedVersions.begin(sql)
                let end = min(count, next + batch)
                var values: [String] = []
                var arguments: [SQLValue] = []
                for index in next..<end {
                    let version = try versions.next()
                    values.append("('people', ?, ?, ?, 0, ?, ?, ?, ?, NULL, ?)")
                    arguments += [
                        .text(uuids[index]), .integer(version), .text(now), .text(user), .text(team), .text(user),
                        .text(client), .text(recordData(index)),
                    ]
                }
                try sql.execute(
                    """
                    INSERT INTO records (collection, uuid, version, updated_at, deleted, owner, team, created_by_user,
                        created_by_client, window_at, data) VALUES \(values.joined(separator: ", "))
                    """, arguments)
                if let written = versions.issued { try SearchIndex.addRecords(at: written, in: sql) }
                try versions.finish(sql)
                next = end
            }
        }
    }

    /// The baseline of initial sync: SQLite copying the same rows between two
    /// database files in one transaction (WAL, its commit synced as every
    /// commit is).
    static func sqliteCopySeconds(from source: String, to destination: String) throws -> Double {
        let target = try SQLiteConnection(path: destination)
        try target.execute(
            "CREATE TABLE copy (id INTEGER PRIMARY KEY, collection TEXT, uuid TEXT, version INTEGER, updated_at TEXT, deleted INTEGER, owner TEXT, team TEXT, created_by_user TEXT, created_by_client TEXT, window_at TEXT, data TEXT, device_time TEXT, written_user TEXT, written_client TEXT, written_seq INTEGER, written_version INTEGER)")
        try target.execute("ATTACH DATABASE '\(source)' AS source")
        let start = DispatchTime.now().uptimeNanoseconds
        try target.transaction {
            try target.execute("INSERT INTO copy SELECT * FROM source.records WHERE collection = 'people'")
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        target.close()
        return seconds
    }
}

/// A wall clock that stands still (seeded ids for generated data).
struct FixedClock: WallClock {
    func now() -> Date { Date(timeIntervalSince1970: 1_796_000_000) }
}

/// `outpost serve` as a child process, for benchmarks that measure the client alone.
/// (Started with `SpawnedProcess`: Foundation's `Process.run()` crashes now and then on Linux.)
final class ServerProcess {
    let process: SpawnedProcess
    let port: UInt16

    /// `logPath` keeps the server's request log (one JSON line per request, with its duration).
    init(database: String, threads: Int = 8, logPath: String? = nil, extra: [String] = []) throws {
        let arguments = ["serve", "--database", database, "--port", "0", "--threads", String(threads)] + (logPath == nil ? ["--quiet"] : [])
            + extra
        if let logPath { _ = FileManager.default.createFile(atPath: logPath, contents: nil) }
        process = try SpawnedProcess(
            URL(fileURLWithPath: Bench.executable), arguments, stdout: .pipe, stderr: logPath.map { .file($0) } ?? .discard)
        var buffer = Data()
        while !buffer.contains(UInt8(ascii: "\n")) {
            let chunk = process.standardOutput!.availableData
            if chunk.isEmpty { throw CommandFailure("The benchmark server did not start.") }
            buffer += chunk
        }
        let line = String(decoding: buffer, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        port = UInt16(line.split(separator: " ").last ?? "") ?? 0
    }

    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// Total time the server spent answering requests to `path`, from its log.
    static func serverSeconds(log: String, path: String) -> (seconds: Double, requests: Int) {
        guard let text = try? String(contentsOfFile: log, encoding: .utf8) else { return (0, 0) }
        var total = 0.0
        var count = 0
        for line in text.split(separator: "\n") where line.hasPrefix("{") {
            guard let object = try? JSONValue.parse(String(line)).objectValue, object["path"]?.stringValue == path,
                object["status"]?.intValue == 200
            else { continue }
            if case .double(let milliseconds) = object["duration_ms"] { total += milliseconds / 1000 }
            if case .int(let milliseconds) = object["duration_ms"] { total += Double(milliseconds) / 1000 }
            count += 1
        }
        return (total, count)
    }

    func stop() {
        process.signal(SIGTERM)
        process.waitUntilExit()
    }
}

/// A schema of its own on a PostgreSQL server, dropped by `drop()`: each
/// measurement meets a fresh database, with no statistics yet, as a new
/// deployment does.
final class ScratchSchema {
    let name: String
    private let admin: PostgresDatabase

    init(on postgres: String) throws {
        name = "bench_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12)
        admin = try PostgresDatabase(url: postgres, poolSize: 1)
        _ = try admin.write { try $0.execute("CREATE SCHEMA \(name)", []) }
    }

    /// `url` (this server, or a proxy in front of it) with this schema first on the search path.
    func url(_ url: String) -> String {
        url + (url.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(name)"
    }

    func drop() {
        _ = try? admin.write { try $0.execute("DROP SCHEMA \(name) CASCADE", []) }
        admin.close()
    }
}

/// One figure over repeated runs (`outpost bench --repeat N`): its ratio's
/// spread and how often it met its target. This machine is noisy; one run
/// proves little.
struct BenchSummary: Codable {
    var name: String
    var runs: Int
    var ratioMin: Double
    var ratioMedian: Double
    var ratioMax: Double
    var met: Int

    enum CodingKeys: String, CodingKey {
        case name, runs, met
        case ratioMin = "ratio_min"
        case ratioMedian = "ratio_median"
        case ratioMax = "ratio_max"
    }

    static func of(_ results: [BenchResult]) -> [BenchSummary] {
        var names: [String] = []
        for result in results where result.ratio != nil && !names.contains(result.name) { names.append(result.name) }
        return names.map { name in
            let runs = results.filter { $0.name == name }
            let ratios = runs.compactMap(\.ratio).sorted()
            return BenchSummary(
                name: name, runs: runs.count, ratioMin: ratios.first ?? 0, ratioMedian: ratios[ratios.count / 2],
                ratioMax: ratios.last ?? 0, met: runs.filter { $0.met == true }.count)
        }
    }

    var line: String {
        "\(name) over \(runs) runs: ratio min " + String(format: "%.2f, median %.2f, max %.2f", ratioMin, ratioMedian, ratioMax)
            + "; target met in \(met)"
    }
}
