import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting

/// push: mutations queued offline, then drained to `outpost serve`.
enum PushBench {
    static func run(mutations: Int, postgres: String?) async throws -> [BenchResult] {
        var results: [BenchResult] = []
        let directory = try TemporaryDirectory(prefix: "outpost-bench")
        for (backend, location) in [("sqlite", directory.path("server.sqlite"))] + (postgres.map { [("postgres", $0)] } ?? []) {
            let database = try DatabaseLocation.open(location)
            _ = try SyncServer(database: database, config: ServerConfig())
            let token = try TokenStore(database: database).issue(user: "pusher-\(UUID().uuidString.prefix(8))", role: .field, team: "t", ttl: nil)
            database.close()
            let log = directory.path("server-\(backend).log")
            let server = try ServerProcess(database: location, logPath: log)
            defer { server.stop() }
            let store = try LocalStore(path: directory.path("device-\(backend).sqlite"), collections: [CollectionDescriptor(name: "people")])
            try await store.write { tx in
                for index in 0..<mutations {
                    try tx.create(in: "people", ["name": .string("Queued \(index)"), "section": .int(Int64(index % 50))])
                }
            }
            var options = SyncOptions()
            options.liveUpdates = false  // measured (or replayed) cycle by cycle
            options.periodicInterval = nil
            options.pushBatchSize = 500
            options.requestTimeout = 120
            let engine = SyncEngine(store: store, transport: URLSessionTransport(baseURL: server.url), token: token, options: options)
            var confirmed = 0
            let seconds = try await Bench.time { confirmed = try await engine.sync(timeout: .seconds(1800)).confirmed }
            guard confirmed == mutations else { throw CommandFailure("Only \(confirmed) of \(mutations) mutations were confirmed.") }
            server.stop()
            // Intake: mutations over the time the server spent answering pushes
            // (what peers publish); the end-to-end drain rate is a detail.
            let (serverSeconds, requests) = ServerProcess.serverSeconds(log: log, path: "/v1/push")
            let intake = serverSeconds > 0 ? Double(mutations) / serverSeconds : 0
            var result = BenchResult(
                name: backend == "sqlite" ? "push" : "push-postgres", figure: intake, unit: "mutations/s (server intake)",
                baseline: 3000, baselineLabel: "published peers' server intake (2,000-4,000 ops/s)", ratio: intake / 3000,
                ratioMeaning: "Outpost intake / 3,000 ops/s", target: backend == "sqlite" ? "at least 10,000 mutations/s" : "reported",
                met: backend == "sqlite" ? intake >= 10_000 : nil)
            result.details = [
                "mutations": Double(mutations), "push_requests": Double(requests), "server_seconds": serverSeconds,
                "end_to_end_seconds": seconds, "end_to_end_mutations_per_second": Double(mutations) / seconds,
            ]
            result.notes = ["batches of 500 over HTTP on loopback; end to end includes the client's request building and settlement"]
            results.append(result)
            await store.close()
        }
        return results
    }
}
