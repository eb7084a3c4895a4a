import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting

/// many-devices: many devices syncing at once against one server, and a
/// reconnect storm with and without jitter.
enum ManyDevicesBench {
    /// Counts requests in progress at the server, to find the peak.
    final class Gauge: Sendable {
        private struct Counts {
            var current = 0
            var peak = 0
            var total = 0
        }

        private let counts = Locked(Counts())
        func enter() {
            counts.withLock {
                $0.current += 1
                $0.total += 1
                $0.peak = max($0.peak, $0.current)
            }
        }
        func leave() { counts.withLock { $0.current -= 1 } }
        func reset() {
            counts.withLock {
                $0.peak = 0
                $0.total = 0
            }
        }
        var snapshot: (peak: Int, total: Int) { counts.withLock { ($0.peak, $0.total) } }
    }

    struct Fleet {
        let directory: TemporaryDirectory
        let server: SyncServer
        let http: HTTPServer
        let gauge: Gauge
    }

    static func fleet(threads: Int) throws -> Fleet {
        let directory = try TemporaryDirectory(prefix: "outpost-bench")
        let server = try SyncServer(database: try SQLiteServerDatabase(path: directory.path("server.sqlite")), config: ServerConfig())
        let gauge = Gauge()
        // Every simulated device connects from 127.0.0.1: lift the per-address
        // cap to the total so the bench measures the server, not the cap.
        let connections = try ConnectionLimits(total: 1024, perAddress: 1024, idleTimeoutSeconds: 30)
        let http = try HTTPServer(port: 0, threads: threads, connections: connections) { request in
            gauge.enter()
            defer { gauge.leave() }
            return server.handle(request)
        }
        return Fleet(directory: directory, server: server, http: http, gauge: gauge)
    }

    /// The storm's devices give up on a request after this many seconds (the engine's default).
    static let stormRequestTimeout = SyncOptions().requestTimeout

    static func device(_ fleet: Fleet, _ index: Int, jitter: Duration, probe: FirstAnswerProbe? = nil) throws -> (LocalStore, SyncEngine) {
        let store = try LocalStore(path: fleet.directory.path("d\(index)-\(UUID().uuidString.prefix(6)).sqlite"), collections: [CollectionDescriptor(name: "people")])
        var options = SyncOptions()
        options.liveUpdates = false  // measured (or replayed) cycle by cycle
        options.periodicInterval = nil
        options.reconnectJitter = jitter
        options.requestTimeout = probe == nil ? 30 : stormRequestTimeout
        let token = try fleet.server.tokens.issue(user: "device-\(index)", role: .field, team: "t-\(index % 10)", ttl: nil)
        let transport = HTTPTransport.make(baseURL: URL(string: "http://127.0.0.1:\(fleet.http.port)")!)
        let engine = SyncEngine(
            store: store, transport: probe.map { $0.watching(transport) } ?? transport, token: token, options: options,
            seed: UInt64(index + 1))
        return (store, engine)
    }

    static func run(devices: Int, seconds: Double, stormDevices: Int, jitter: Duration) async throws -> [BenchResult] {
        let fleet = try fleet(threads: 8)
        defer { fleet.http.stop() }
        var engines: [(LocalStore, SyncEngine)] = []
        for index in 0..<devices { engines.append(try device(fleet, index, jitter: .zero)) }

        // Every device: capture, sync, again, until the time is up.
        let deadline = Date() + seconds
        let outcomes = try await withThrowingTaskGroup(of: ([Double], [String: Int]).self) { group in
            for (store, engine) in engines {
                group.addTask {
                    var latencies: [Double] = []
                    var errors: [String: Int] = [:]
                    var round = 0
                    while Date() < deadline {
                        round += 1
                        try await store.create(in: "people", Bench.recordObject(round))
                        let start = DispatchTime.now().uptimeNanoseconds
                        do {
                            try await engine.sync(timeout: .seconds(60))
                            latencies.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
                        } catch let failure as SyncFailure {
                            errors["\(failure)", default: 0] += 1
                        }
                    }
                    return (latencies, errors)
                }
            }
            var latencies: [Double] = []
            var errors: [String: Int] = [:]
            for try await (deviceLatencies, deviceErrors) in group {
                latencies += deviceLatencies
                for (kind, count) in deviceErrors { errors[kind, default: 0] += count }
            }
            return (latencies, errors)
        }
        for (store, engine) in engines {
            await engine.stop()
            await store.close()
        }
        let (latencies, errors) = outcomes
        var load = BenchResult(
            name: "many-devices", figure: Double(latencies.count) / seconds, unit: "syncs/s", baseline: nil, baselineLabel: nil,
            ratio: nil, ratioMeaning: nil, target: "no errors other than 429/503 with Retry-After",
            met: errors.keys.allSatisfy { $0.hasPrefix("serverBusy") })
        load.details = [
            "devices": Double(devices), "seconds": seconds, "p50_ms": Bench.percentile(latencies, 50) * 1000,
            "p99_ms": Bench.percentile(latencies, 99) * 1000, "errors": Double(errors.values.reduce(0, +)),
        ]
        load.notes = errors.map { "errors \($0.key): \($0.value)" }.sorted()

        // A reconnect storm: every device comes back at once, judged by what
        // each device sees: how long its first request waited for an answer,
        // and whether that wait passed the request timeout.
        var storm: [BenchResult] = []
        for window in [Duration.zero, jitter] {
            var fleetDevices: [(LocalStore, SyncEngine, FirstAnswerProbe)] = []
            for index in 0..<stormDevices {
                let probe = FirstAnswerProbe()
                let (store, engine) = try device(fleet, 10_000 + index, jitter: window, probe: probe)
                fleetDevices.append((store, engine, probe))
            }
            for (_, engine, _) in fleetDevices { await engine.receive(PathHint(isConnected: false)) }
            fleet.gauge.reset()
            for (_, _, probe) in fleetDevices { probe.arm() }
            let back = DispatchTime.now().uptimeNanoseconds
            let converged = await Bench.time {
                for (_, engine, _) in fleetDevices { await engine.receive(PathHint(isConnected: true)) }
                // Converged when every device has completed a cycle after coming back.
                while true {
                    var done = 0
                    for (_, engine, _) in fleetDevices where await engine.currentStatus.hasSynced == true { done += 1 }
                    if done == fleetDevices.count { break }
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
            let firsts = fleetDevices.compactMap { $0.2.first }
            let waits = firsts.map(\.wait)
            let sinceBack = firsts.map { Double($0.answeredAt &- back) / 1e9 }
            let overTimeout = firsts.filter { $0.wait > stormRequestTimeout || !$0.answered }.count
            let (peak, total) = fleet.gauge.snapshot
            let withJitter = window != .zero
            var result = BenchResult(
                name: withJitter ? "reconnect-storm-jitter" : "reconnect-storm-no-jitter",
                figure: Bench.percentile(waits, 99) * 1000, unit: "ms (p99 of each device's first request's wait)",
                baseline: stormRequestTimeout * 1000, baselineLabel: "the devices' request timeout",
                ratio: Bench.percentile(waits, 99) / stormRequestTimeout, ratioMeaning: "p99 first-request wait / request timeout",
                target: withJitter ? "no device's first request waits past the request timeout" : "reported: how many did",
                met: withJitter ? overTimeout == 0 && firsts.count == fleetDevices.count : nil)
            result.details = [
                "devices": Double(stormDevices), "first_request_wait_p50_ms": Bench.percentile(waits, 50) * 1000,
                "first_request_wait_max_ms": (waits.max() ?? 0) * 1000, "devices_past_timeout": Double(overTimeout),
                "devices_without_a_first_request": Double(fleetDevices.count - firsts.count),
                "first_answer_after_coming_back_p50_s": Bench.percentile(sinceBack, 50),
                "first_answer_after_coming_back_max_s": sinceBack.max() ?? 0, "seconds_to_converge": converged,
                "requests": Double(total), "peak_requests_in_the_server": Double(peak),
                "jitter_window_s": Double(window.components.seconds), "request_timeout_s": stormRequestTimeout,
            ]
            result.notes = [
                "\(stormDevices) devices in this process, each with its own URLSession and connection, come back at once; "
                    + (withJitter ? "each waits a random part of \(window.components.seconds) s first" : "none waits")
            ]
            storm.append(result)
            for (store, engine, _) in fleetDevices {
                await engine.stop()
                await store.close()
            }
        }
        return [load] + storm
    }
}
