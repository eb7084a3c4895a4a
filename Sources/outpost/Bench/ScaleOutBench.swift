import Foundation
import OutpostCore
import OutpostServer
import OutpostTesting

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// scale-out: push intake of 1 and N `outpost serve` processes on one
/// PostgreSQL, with every write behind one lock (the round-1 design) and
/// with row locks only, in the same run, through a proxy that adds a round
/// trip's latency between the servers and the database (a database on
/// another host). A lock held across round trips is what limits the first
/// design; the second lets writes of different users run side by side.
enum ScaleOutBench {
    struct Settings {
        var postgres: String
        var servers: Int
        var roundTrip: Duration
        var devices: Int
        var batchesPerDevice: Int
        var batchSize: Int
    }

    static func run(_ settings: Settings) async throws -> [BenchResult] {
        guard var target = URLComponents(string: settings.postgres), let host = target.host, let port = target.port else {
            throw UsageError("--postgres must be a URL with a host and a port, such as postgres://user@127.0.0.1:5432/db.")
        }
        guard host == "127.0.0.1" || host == "localhost" else {
            throw UsageError("The scale-out benchmark puts its latency proxy on 127.0.0.1: give a local PostgreSQL.")
        }
        let proxy = try LatencyProxy(targetPort: UInt16(port), roundTrip: settings.roundTrip)
        defer { proxy.stop() }
        target.host = "127.0.0.1"
        target.port = Int(proxy.port)
        let proxied = target.string ?? settings.postgres

        var intake: [String: Double] = [:]
        var details: [String: Double] = [:]
        // Alternating designs, so a slow moment of the machine does not land on one only.
        for count in Array(Set([1, settings.servers])).sorted() {
            for design in [PostgresDatabase.WriteConcurrency.schemaLock, .rowLocks] {
                let rate = try await measure(settings, design: design, servers: count, direct: settings.postgres, proxied: proxied)
                intake["\(design.rawValue)-\(count)"] = rate
                details["\(design == .schemaLock ? "single_lock" : "row_locks")_\(count)_servers_mutations_per_second"] = rate
            }
        }
        let rows = intake["rows-\(settings.servers)"] ?? 0
        let single = intake["schema-\(settings.servers)"] ?? 0
        let milliseconds = Double(settings.roundTrip.components.attoseconds) / 1e15 + Double(settings.roundTrip.components.seconds) * 1000
        details["servers"] = Double(settings.servers)
        details["round_trip_ms"] = milliseconds
        details["devices"] = Double(settings.devices)
        details["mutations_per_design"] = Double(settings.devices * settings.batchesPerDevice * settings.batchSize)
        var result = BenchResult(
            name: "push-scale-out", figure: rows, unit: "mutations/s (\(settings.servers) servers, row locks)",
            baseline: single, baselineLabel: "the same \(settings.servers) servers with every write behind one lock, same run",
            ratio: single > 0 ? rows / single : nil, ratioMeaning: "row-lock intake / single-lock intake",
            target: "at least 3× the single-lock design (3 servers, 1 ms to the database)",
            met: single > 0 ? rows / single >= 3 : nil)
        result.details = details
        result.notes = [
            "\(settings.devices) devices (one user each) push \(settings.batchesPerDevice) batches of \(settings.batchSize) records of ~300 bytes at once, spread over the servers",
            "a user-space proxy adds \(format(milliseconds)) ms to every round trip between the servers and PostgreSQL",
        ]
        return [result]
    }

    /// Mutations per second of wall time for every device's pushes, on a fresh schema.
    private static func measure(
        _ settings: Settings, design: PostgresDatabase.WriteConcurrency, servers count: Int, direct: String, proxied: String
    ) async throws -> Double {
        let schema = try ScratchSchema(on: direct)
        defer { schema.drop() }
        let inSchema = schema.url
        // Migrations and tokens straight to the database, not through the proxy.
        let database = try PostgresDatabase(url: inSchema(direct), poolSize: 1)
        _ = try SyncServer(database: database, config: ServerConfig())
        let tokens = TokenStore(database: database)
        let issued = try (0..<settings.devices).map { try tokens.issue(user: "d-\($0)", role: .field, team: "t", ttl: nil) }
        database.close()

        let logs = try TemporaryDirectory(prefix: "outpost-scale-out")
        let processes = try (0..<count).map { index in
            try ServerProcess(
                database: inSchema(proxied), threads: 8, logPath: logs.path("server-\(index).log"),
                extra: [
                    "--write-lock", design.rawValue, "--lock-timeout", "300", "--statement-timeout", "600",
                    // A push queued behind the single lock is silent for long; it must not be cut as idle.
                    "--idle-timeout", "600",
                ])
        }
        /// What the servers said, for a failure's message.
        func serverLogs() -> String {
            (0..<count).map { index in
                let text = (try? String(contentsOfFile: logs.path("server-\(index).log"), encoding: .utf8)) ?? ""
                return text.split(separator: "\n").filter { !$0.hasPrefix("{") || !$0.contains(#""status":200"#) }
                    .suffix(5).joined(separator: "\n")
            }.joined(separator: "\n")
        }
        defer { for process in processes { process.stop() } }

        var bodies: [[Data]] = []
        var index = 0
        for _ in 0..<settings.devices {
            let client = UUID()
            var seq: Int64 = 0
            var batches: [Data] = []
            for _ in 0..<settings.batchesPerDevice {
                let mutations = (0..<settings.batchSize).map { _ -> Mutation in
                    seq += 1
                    index += 1
                    return Mutation(
                        seq: seq, id: UUID(), op: .create, collection: "people", uuid: UUID(), baseVersion: nil,
                        data: Bench.recordObject(index))
                }
                batches.append(try WireCoding.encode(PushRequest(clientID: client, mutations: mutations)))
            }
            bodies.append(batches)
        }
        let urls = processes.map { $0.url.appendingPathComponent("v1/push") }
        let seconds = try await Bench.time {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (device, batches) in bodies.enumerated() {
                    let url = urls[device % urls.count]
                    let token = issued[device]
                    group.addTask {
                        for body in batches {
                            var request = URLRequest(url: url)
                            request.httpMethod = "POST"
                            request.timeoutInterval = 600
                            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
                            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                            request.httpBody = body
                            let data: Data
                            let response: URLResponse
                            do {
                                (data, response) = try await TestSession.shared.data(for: request)
                            } catch {
                                throw CommandFailure("A benchmark push failed (\(error)). The servers said:\n\(serverLogs())")
                            }
                            guard (response as? HTTPURLResponse)?.statusCode == 200 else {
                                throw CommandFailure(
                                    "A benchmark push was answered \((response as? HTTPURLResponse)?.statusCode ?? 0): "
                                        + String(decoding: data.prefix(300), as: UTF8.self) + "\nThe servers said:\n\(serverLogs())")
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        let total = settings.devices * settings.batchesPerDevice * settings.batchSize
        return Double(total) / seconds
    }

    private static func format(_ value: Double) -> String { String(format: "%.1f", value) }
}
