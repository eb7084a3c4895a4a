import Foundation
import OutpostCore
import OutpostTesting

/// `outpost bench`: every figure with its baseline measured in the same run.
enum BenchCommand {
    static let help = """
        Usage: outpost bench [initial-sync] [local-write] [push] [many-devices] [live] [attachments] [own-tables] [idle-stream] [disk] [--quick] [--json FILE]
                             [--records N] [--postgres URL] [--servers N] [--db-latency MS] [--series] [--mixed-keys] [--repeat N]

        Runs the benchmarks (all when none is named) and prints each figure, its baseline
        measured in the same run and their ratio. Build in release mode for real figures
        (scripts/bench does). --quick shrinks every size for a smoke test.

          --records N      records for initial-sync (default 235,613, the field platform's size)
          --postgres URL   also run initial-sync and push on PostgreSQL; push then also compares
                           several servers with every write behind one lock and with row locks;
                           own-tables runs only with it
          --servers N      push on PostgreSQL: the servers of the scale-out comparison (default 3)
          --db-latency MS  push on PostgreSQL: milliseconds a proxy adds to each round trip between the
                           servers and the database in the scale-out comparison (default 1, as "1ms" or "1")
          --series         initial-sync at 10k, 50k, 100k and 235k records (for the chart)
          --mixed-keys     accepted and ignored: initial-sync always also downloads the same records
                           with their uuids in no key order (as UUIDv4 keys arrive), beside the copy
          --repeat N       run the chosen benchmarks N times in a row, then print each figure's ratio
                           as min / median / max and in how many runs it met its target
          --json FILE      also write the results as JSON
          --idle N         live: idle streams held open on one server (default 10,000)
          --live-devices L live: the device counts to measure propagation with (default 1,100,1000)
          --link RATE:RTT  initial-sync over a link paced to RATE each way with RTT added to each round
                           trip (such as 10mbit:50ms), instead of loopback: bytes on the wire against the
                           pages gzipped at level 6, time against bytes ÷ bandwidth

        attachments uploads 100 photos of 2 MB through the engine against curl PUTting the same
        bytes (same run), then through a proxy that cuts the upload every 5 MB.

        idle-stream (run only when named): the CPU an open live channel to an idle server costs,
        through CurlTransport and URLSessionTransport, 10 s each (--quick: 3 s), beside the
        process with none open.

        disk (run only when named): the server database's bytes per record after 20 devices create
        records of ~230 bytes and edit 43% of them, beside the records table and its indexes, by table
        (SQLite, and PostgreSQL with --postgres). --records N sets the records (default 100,000;
        --quick 5,000).

        own-tables (needs --postgres) maps a table of the app's own database: 10,000 device creates
        pushed into it against the same INSERTs through libpq; 235,613 rows it held before Outpost
        came (backfilled, then downloaded by one device) against SQLite copying them; 50,000 of them
        updated by one backend statement, sequenced, against the backfill's pace; 300 rows the
        backend writes reaching a live device against rows another device pushes. --quick: 1,000,
        20,000, 2,000 and 50.
        """

    static let names = ["initial-sync", "local-write", "push", "many-devices", "live", "attachments", "own-tables", "idle-stream", "disk"]

    static func run(_ words: [String]) async throws {
        var arguments = try Arguments(words, flagNames: ["quick", "series", "mixed-keys"])
        let quick = arguments.flag("quick")
        let series = arguments.flag("series")
        _ = arguments.flag("mixed-keys")  // both key orders always run
        let jsonPath = arguments.option("json")
        let records = try arguments.integer("records", in: 1...5_000_000) ?? (quick ? 5_000 : 235_613)
        let postgres = arguments.option("postgres")
        let idle = try arguments.integer("idle", in: 1...60_000) ?? (quick ? 500 : 10_000)
        var liveDevices = quick ? [1, 20] : [1, 100, 1_000]
        if let list = arguments.option("live-devices") {
            let counts = list.split(separator: ",").map { Int(String($0).trimmingCharacters(in: .whitespaces)) }
            guard !counts.isEmpty, counts.allSatisfy({ ($0 ?? 0) >= 1 && ($0 ?? 0) <= 5_000 }) else {
                throw UsageError("--live-devices takes device counts from 1 to 5,000, separated by commas, such as 1,100,1000.")
            }
            liveDevices = counts.compactMap { $0 }
        }
        let servers = try arguments.integer("servers", in: 1...16) ?? 3
        let repeats = try arguments.integer("repeat", in: 1...100) ?? 1
        let latencyText = arguments.option("db-latency") ?? "1"
        guard let latency = Double(latencyText.hasSuffix("ms") ? String(latencyText.dropLast(2)) : latencyText),
            latency >= 0, latency <= 1_000
        else { throw UsageError("--db-latency takes milliseconds from 0 to 1000, such as 1ms or 0.5.") }
        let link = try arguments.option("link").map { text in
            do {
                return try LinkRelay.Link(parsing: text)
            } catch {
                throw UsageError("--link: \(error)")
            }
        }
        try arguments.checkAllUsed()
        for name in arguments.positional where !names.contains(name) {
            throw UsageError("'\(name)' is not a benchmark; choose from \(names.joined(separator: ", ")).")
        }
        // idle-stream compares two transports for 25 s: only when named.
        let chosen = arguments.positional.isEmpty ? names.filter { $0 != "idle-stream" && $0 != "disk" } : arguments.positional
        var results: [BenchResult] = []
        func report(_ new: [BenchResult]) {
            for result in new {
                print(describe(result))
                results.append(result)
            }
        }
        for run in 1...repeats {
            if repeats > 1 { print("— run \(run) of \(repeats)") }
            for name in chosen {
                switch name {
                case "initial-sync":
                    if let link {
                        report(try await InitialSyncBench.runOverLink(records: records, link: link))
                        continue
                    }
                    let sizes = series ? [10_000, 50_000, 100_000, records] : [records]
                    for size in sizes {
                        report(
                            try await InitialSyncBench.run(
                                records: size, postgres: series ? nil : postgres, encrypted: !series, mixedKeys: !series
                            ).map { result in
                            var result = result
                            if series { result.name += "-\(size)" }
                            return result
                        })
                    }
                case "local-write":
                    report([try await LocalWriteBench.run(operations: quick ? 1_000 : 10_000)])
                case "push":
                    report(try await PushBench.run(mutations: quick ? 1_000 : 10_000, postgres: postgres))
                    if let postgres {
                        report(
                            try await ScaleOutBench.run(
                                ScaleOutBench.Settings(
                                    postgres: postgres, servers: servers, roundTrip: .microseconds(Int64(latency * 1000)),
                                    devices: quick ? 6 : 24, batchesPerDevice: quick ? 1 : 2, batchSize: quick ? 20 : 100)))
                    }
                case "many-devices":
                    report(
                        try await ManyDevicesBench.run(
                            devices: quick ? 20 : 200, seconds: quick ? 3 : 30, stormDevices: quick ? 100 : 1_000,
                            jitter: quick ? .seconds(2) : .seconds(10)))
                case "live":
                    report(try await LiveBench.run(deviceCounts: liveDevices, rounds: quick ? 10 : 50, idleConnections: idle))
                case "attachments":
                    report(try await AttachmentBench.run(photos: quick ? 4 : 100, photoBytes: quick ? 500_000 : 2_000_000))
                case "idle-stream":
                    report(try await IdleStreamBench.run(seconds: quick ? 3 : 10))
                case "disk":
                    let given = arguments.positional.count == 1 && words.contains("--records")
                    report(try await DiskBench.run(records: given ? records : (quick ? 5_000 : 100_000), postgres: postgres))
                case "own-tables":
                    // Mapped tables are PostgreSQL's alone.
                    guard let postgres else {
                        if arguments.positional.contains(name) { throw UsageError("own-tables needs --postgres URL.") }
                        print("own-tables: skipped, it needs --postgres URL")
                        continue
                    }
                    report(
                        try await OwnTablesBench.run(
                            postgres: postgres,
                            sizes: OwnTablesBench.Sizes(
                                pushes: quick ? 1_000 : 10_000, existingRows: quick ? 20_000 : 235_613, bulkRows: quick ? 2_000 : 50_000,
                                liveRounds: quick ? 50 : 300)))
                default: break
                }
            }
        }
        let summaries = repeats > 1 ? BenchSummary.of(results) : []
        for summary in summaries { print(summary.line) }
        if let jsonPath {
            struct Output: Encodable {
                var date: String
                var machine: String
                var results: [BenchResult]
                var summaries: [BenchSummary]
            }
            let output = Output(
                date: ServerTimestamp(Date()).rawValue,
                machine: "\(ProcessInfo.processInfo.activeProcessorCount) cores, \(ProcessInfo.processInfo.physicalMemory / 1_073_741_824) GiB",
                results: results, summaries: summaries)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try encoder.encode(output).write(to: URL(fileURLWithPath: jsonPath))
        }
    }

    static func describe(_ result: BenchResult) -> String {
        var line = "\(result.name): \(format(result.figure)) \(result.unit)"
        if let baseline = result.baseline, let label = result.baselineLabel {
            line += "; baseline \(format(baseline)) (\(label))"
        }
        if let ratio = result.ratio { line += "; ratio \(String(format: "%.2f", ratio))" }
        line += "; target: \(result.target)"
        if let met = result.met { line += met ? " — met" : " — NOT met" }
        let details = result.details.keys.sorted().map { "\($0)=\(format(result.details[$0]!))" }.joined(separator: ", ")
        if !details.isEmpty { line += "\n    \(details)" }
        for note in result.notes { line += "\n    \(note)" }
        return line
    }

    static func format(_ value: Double) -> String {
        if value >= 1000 { return String(format: "%.0f", value) }
        if value >= 10 { return String(format: "%.1f", value) }
        return String(format: "%.3f", value)
    }
}
