import Foundation
import OutpostCore
import OutpostServer
import OutpostTesting

/// initial-sync over a slow link (`--link 10mbit:50ms`): the same download
/// through `LinkRelay`, which paces bytes to the bandwidth and delays each
/// by half the round trip, counting what crosses it.
extension InitialSyncBench {
    /// The pages' size and time over the link, against what the link allows:
    /// its bytes against the same JSON pages gzipped at level 6, its time
    /// against those bytes ÷ bandwidth. Also the cost of each zlib and
    /// libdeflate level on pages of records (the server's choice of level).
    static func runOverLink(records: Int, link: LinkRelay.Link) async throws -> [BenchResult] {
        let directory = try TemporaryDirectory(prefix: "outpost-bench-link")
        let path = directory.path("server.sqlite")
        let token: String
        do {
            let database = try SQLiteServerDatabase(path: path)
            defer { database.close() }
            let server = try SyncServer(database: database, config: ServerConfig())
            token = try TokenStore(database: database).issue(user: "bench", role: .field, team: "t", ttl: nil)
            try Bench.seedServer(database, count: records, user: "bench", team: "t")
            _ = server
        }
        let plainPages = try pages(path: path, token: token, limit: 5000)
        let gzipSix = plainPages.reduce(0) { total, page in
            total + (DeflateStream(format: .gzip, level: 6).map { stream in page.withUnsafeBytes { stream.compress($0).count } } ?? page.count)
        }
        let plainBytes = plainPages.reduce(0) { $0 + $1.count }
        let levels = try levelCosts(path: path, token: token)

        let server = try ServerProcess(database: path)
        defer { server.stop() }
        let relay = try LinkRelay(targetPort: server.port, link: link)
        defer { relay.stop() }
        let client = try SpawnedProcess(
            URL(fileURLWithPath: Bench.executable),
            ["_bench-client", "--server", relay.url.absoluteString, "--token", token, "--db", directory.path("device.sqlite")],
            stdout: .pipe)
        let data = client.standardOutput!.readDataToEndOfFile()
        guard client.terminationStatus == 0, let figures = try? JSONDecoder().decode(ClientFigures.self, from: data) else {
            throw CommandFailure("The initial-sync client failed over the link: \(String(decoding: data, as: UTF8.self))")
        }
        let wire = Double(relay.bytesDown)
        let lineSeconds = wire * 8 / link.bitsPerSecond
        var bytes = BenchResult(
            name: "initial-sync-link-bytes", figure: wire / 1e6, unit: "MB",
            baseline: Double(gzipSix) / 1e6, baselineLabel: "the same JSON pages gzipped at level 6", ratio: wire / Double(gzipSix),
            ratioMeaning: "bytes on the wire to the device / gzip-6 size of the pages", target: "at most 1.2x",
            met: wire / Double(gzipSix) <= 1.2)
        bytes.details = [
            "records": Double(figures.records), "plain_json_mb": Double(plainBytes) / 1e6,
            "bytes_up_mb": Double(relay.bytesUp) / 1e6,
        ]
        for cost in levels where cost.pageRecords == 1000 {
            bytes.details["\(cost.library)_\(cost.level)_ms_per_1000_record_page"] = cost.milliseconds
            bytes.details["\(cost.library)_\(cost.level)_bytes_over_zlib_6"] = cost.sizeOverSix
        }
        bytes.notes = ["link: \(link)", "answers at libdeflate level \(AnswerCompression.level)"] + levelTable(levels)
        var time = BenchResult(
            name: "initial-sync-link-time", figure: figures.seconds, unit: "s",
            baseline: lineSeconds, baselineLabel: "bytes on the wire ÷ bandwidth", ratio: figures.seconds / lineSeconds,
            ratioMeaning: "download time over the link / the time its bytes need at the link's bandwidth", target: "at most 1.3x",
            met: figures.seconds / lineSeconds <= 1.3)
        time.details = ["records": Double(figures.records), "pages": Double(plainPages.count)]
        time.notes = ["link: \(link)"]
        return [bytes, time]
    }

    /// The download's answer bodies as a server gives them in process (plain).
    static func pages(path: String, token: String, limit: Int) throws -> [[UInt8]] {
        let database = try SQLiteServerDatabase(path: path)
        defer { database.close() }
        var config = try ServerConfig()
        config.buildsPagesAhead = false
        let server = try SyncServer(database: database, config: config)
        var bodies: [[UInt8]] = []
        var cursor: String?
        while true {
            var target = "/v1/pull?collections=people,visits&limit=\(limit)"
            if let cursor { target += "&cursor=\(cursor)" }
            let answer = server.handle(HTTPRequest(method: "GET", target: target, headers: ["Authorization": "Bearer \(token)"]))
            guard answer.status == 200 else { throw CommandFailure("A pull for the link's figures answered \(answer.status).") }
            bodies.append(answer.body)
            let page = try WireCoding.decode(PullResponse.self, from: Data(answer.body))
            cursor = page.cursor.rawValue
            if !page.hasMore { return bodies }
        }
    }

    struct LevelCost {
        var library: String
        var level: Int32
        var pageRecords: Int
        var milliseconds: Double
        var sizeOverSix: Double
        var timeOverZlibFour: Double
        var pageBytes: Double
    }

    /// Compression of whole pages, as answers and pages built ahead go: zlib
    /// levels 1 to 6 (one reused state, as streams keep one) and libdeflate
    /// levels 1 to 9 (one reused compressor, as the server's pool does), on
    /// up to 20 pages of 1,000 records and 4 of 5,000: CPU time a page,
    /// bytes against zlib level 6's, time against zlib level 4's.
    static func levelCosts(path: String, token: String) throws -> [LevelCost] {
        var costs: [LevelCost] = []
        for (records, count) in [(1000, 20), (5000, 4)] {
            let sample = Array(try pages(path: path, token: token, limit: records).prefix(count))
            let pageBytes = Double(sample.reduce(0) { $0 + $1.count }) / Double(max(1, sample.count))
            var measured: [(library: String, level: Int32, milliseconds: Double, size: Int)] = []
            for level: Int32 in 1...6 {
                guard let stream = DeflateStream(format: .gzip, level: level) else { continue }
                let (milliseconds, size) = fastestRound(sample) { page in page.withUnsafeBytes { stream.compress($0).count } }
                measured.append(("zlib", level, milliseconds, size))
            }
            for level: Int32 in 1...9 {
                guard let deflater = AnswerDeflater(level: level) else { continue }
                let (milliseconds, size) = fastestRound(sample) { deflater.compress($0, as: .gzip)?.count ?? $0.count }
                measured.append(("libdeflate", level, milliseconds, size))
            }
            let six = Double(measured.first { $0.library == "zlib" && $0.level == 6 }?.size ?? 1)
            let four = measured.first { $0.library == "zlib" && $0.level == 4 }?.milliseconds ?? 1
            costs += measured.map {
                LevelCost(
                    library: $0.library, level: $0.level, pageRecords: records, milliseconds: $0.milliseconds,
                    sizeOverSix: Double($0.size) / six, timeOverZlibFour: $0.milliseconds / four, pageBytes: pageBytes)
            }
        }
        return costs
    }

    /// Milliseconds a page over `sample` (the fastest of three rounds: the
    /// machine is shared) and the bytes `compress` gave for the whole sample.
    static func fastestRound(_ sample: [[UInt8]], _ compress: ([UInt8]) -> Int) -> (Double, Int) {
        var size = 0
        var best = Double.infinity
        for _ in 0..<3 {
            size = 0
            let started = DispatchTime.now().uptimeNanoseconds
            for page in sample { size += compress(page) }
            best = min(best, Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6)
        }
        return (best / Double(max(1, sample.count)), size)
    }

    /// The level table as lines of the report, one per page size and compressor.
    static func levelTable(_ costs: [LevelCost]) -> [String] {
        var lines: [String] = []
        for records in Set(costs.map(\.pageRecords)).sorted() {
            let rows = costs.filter { $0.pageRecords == records }
            lines.append("pages of \(records) records (\(Int(rows.first?.pageBytes ?? 0)) bytes plain): ms a page, bytes ÷ zlib 6's, time ÷ zlib 4's")
            for library in ["zlib", "libdeflate"] {
                let cells = rows.filter { $0.library == library }.map {
                    String(format: "%d: %.2f ms %.3fx %.2fx", $0.level, $0.milliseconds, $0.sizeOverSix, $0.timeOverZlibFour)
                }
                lines.append("  \(library) " + cells.joined(separator: " | "))
            }
        }
        return lines
    }
}
