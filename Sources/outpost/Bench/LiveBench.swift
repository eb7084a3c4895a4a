import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// `outpost bench live`: how fast a change reaches devices that hold a
/// live channel, against the push round trip of the same run; and what
/// thousands of idle live connections cost the server.
enum LiveBench {
    static func run(deviceCounts: [Int], rounds: Int, idleConnections: Int) async throws -> [BenchResult] {
        var results: [BenchResult] = []
        for count in deviceCounts {
            results.append(try await propagation(devices: count, rounds: rounds))
        }
        // The floor matters at scale only (and keeps `--quick` short).
        if let most = deviceCounts.max(), most >= 100 {
            let floor = try commitFloor(files: most, rounds: 10)
            if let index = results.firstIndex(where: { $0.name == "live-propagation-\(most)" }) {
                results[index] = withCPUFloor(results[index], commitFloor: floor, devices: most)
            }
            results.append(floor)
        }
        if let most = deviceCounts.max() {
            results.append(try await delivery(sockets: most, rounds: rounds))
            results.append(try await propagationAmong(devices: most, observers: most >= 100 ? 10 : 2, rounds: rounds))
        }
        results.append(contentsOf: try await idle(connections: idleConnections))
        return results
    }

    /// A server on SQLite in a temporary folder, on a socket, with room
    /// for `connections` streams of one user from one address.
    static func liveServer(connections: Int) async throws -> (TemporaryDirectory, SyncServer, HTTPServer, URL) {
        let directory = try TemporaryDirectory(prefix: "outpost-bench-live")
        var config = try ServerConfig()
        config.connections = try ConnectionLimits(
            total: connections + 256, perAddress: connections + 256, idleTimeoutSeconds: 30, livePerUser: connections + 256)
        let server = try SyncServer(database: try SQLiteServerDatabase(path: directory.path("server.sqlite")), config: config)
        let http = try HTTPServer(port: 0, threads: 4, connections: config.connections, server: server)
        let base = URL(string: "http://127.0.0.1:\(http.port)")!
        try await waitUntilServing(base)
        return (directory, server, http, base)
    }

    // MARK: Propagation

    /// From a push's answer at the writer to each live device's store
    /// commit of that change (the engine's `received` event, sent after the
    /// page and its cursor committed).
    static func propagation(devices: Int, rounds: Int) async throws -> BenchResult {
        let (directory, server, http, base) = try await liveServer(connections: devices)
        defer { http.stop() }

        let fleet = try await LiveFleet(devices: devices, server: server, base: base, directory: directory)
        defer { fleet.listeners.forEach { $0.cancel() } }
        let (streaming, polling, secondsToGoLive) = await fleet.channels()
        let writer = try server.tokens.issue(user: "writer", role: .field, team: "t-1", ttl: nil)
        let client = UUID()
        // What the live engines cost with nothing to receive (heartbeats,
        // the stores' watch for other processes' commits).
        try await Task.sleep(for: .seconds(1))
        let idleFrom = LiveCPU.now()
        try await Task.sleep(for: .seconds(2))
        let idle = LiveCPU.now() - idleFrom
        var pushTimes: [Double] = []
        var propagation: [Double] = []
        var missed = 0
        // Each round's slowest device: is the p99 one slow round or every round's tail?
        var roundMaxima: [Double] = []
        var firstRound: Int?
        let roundsFrom = LiveCPU.now()
        let roundsStarted = DispatchTime.now().uptimeNanoseconds
        for round in 0..<rounds {
            let uuid = UUID()
            let request = try pushRequest(base, token: writer, client: client, seq: Int64(round + 1), uuid: uuid)
            let sent = DispatchTime.now().uptimeNanoseconds
            _ = try await TestSession.shared.data(for: request)
            let answered = DispatchTime.now().uptimeNanoseconds
            pushTimes.append(Double(answered - sent) / 1e6)
            let times = await fleet.arrivals(of: uuid, within: 10)
            missed += devices - times.count
            let round = times.map { Double(Int64($0) - Int64(answered)) / 1e6 }
            propagation += round
            roundMaxima.append(round.max() ?? 0)
            if firstRound == nil { firstRound = round.count }
            try await Task.sleep(for: .milliseconds(20))
        }
        let busy = LiveCPU.now() - roundsFrom
        let roundsSeconds = Double(DispatchTime.now().uptimeNanoseconds - roundsStarted) / 1e9
        await fleet.stop()

        var result = propagationResult(
            name: "live-propagation-\(devices)",
            unit: devices > 1 ? "ms p99 from push answer to store commit, all \(devices) devices' engines in this process" : "ms p99 from push answer to store commit",
            propagation: propagation, pushTimes: pushTimes, judged: true)
        result.details.merge([
            "devices": Double(devices), "rounds": Double(rounds), "missed": Double(missed), "devices_on_streams": Double(streaming),
            "devices_on_long_polls": Double(polling), "seconds_until_every_channel_open": secondsToGoLive,
        ]) { _, new in new }
        result.details.merge(cpuDetails(idle: idle, idleSeconds: 2, busy: busy, busySeconds: roundsSeconds, changes: rounds * devices)) { _, new in new }
        result.details.merge(roundDetails(propagation, maxima: roundMaxima, firstRound: firstRound ?? 0)) { _, new in new }
        if streaming < devices { result.notes.append("\(devices - streaming) devices were not on a stream when the rounds began") }
        if missed > 0 { result.notes.append("\(missed) arrivals did not come within 10 s") }
        return result
    }

    /// The first round's slowest device, the p99 of the rounds after it,
    /// and the median of the rounds' slowest devices: whether the p99 is
    /// one slow round or every round's tail.
    static func roundDetails(_ propagation: [Double], maxima: [Double], firstRound: Int) -> [String: Double] {
        guard maxima.count > 1, propagation.count > firstRound else { return [:] }
        return [
            "first_round_max_ms": maxima[0],
            "p99_after_first_round_ms": Bench.percentile(Array(propagation.dropFirst(firstRound)), 99),
            "round_max_p50_ms": Bench.percentile(maxima, 50),
        ]
    }

    /// The CPU of a propagation run: per change each engine stored (the
    /// engines' threads, then the server's), with what the same threads
    /// used while idle taken out, and the idle use itself.
    static func cpuDetails(idle: LiveCPU, idleSeconds: Double, busy: LiveCPU, busySeconds: Double, changes: Int) -> [String: Double] {
        let perChange = { (busyShare: Double, idleShare: Double) -> Double in
            max(0, busyShare - idleShare / idleSeconds * busySeconds) * 1000 / Double(max(1, changes))
        }
        return [
            "engine_cpu_ms_per_change": perChange(busy.engines, idle.engines),
            "server_cpu_ms_per_change": perChange(busy.server, idle.server),
            "engine_cpu_ms_per_change_with_idle": busy.engines * 1000 / Double(max(1, changes)),
            "idle_engines_cpu_percent": idle.engines / idleSeconds * 100,
            "cores_busy_during_rounds": busy.process / busySeconds,
        ]
    }

    /// The floor under every engine's commit: one row committed into each
    /// of `files` SQLite files, nothing else: synced on 2 and on 64 threads
    /// (flushes overlap), and unsynced on 2 (what two cores can commit).
    static func commitFloor(files: Int, rounds: Int) throws -> BenchResult {
        let synced = try LiveCommitFloor.measure(files: files, rounds: rounds, threads: 2, durability: .powerLoss)
        let overlapped = try LiveCommitFloor.measure(files: files, rounds: rounds, threads: 64, durability: .powerLoss)
        let unsynced = try LiveCommitFloor.measure(files: files, rounds: rounds, threads: 2, durability: .processCrash)
        var result = BenchResult(
            name: "live-commit-floor-\(files)", figure: Bench.percentile(overlapped.allCommittedMilliseconds, 50),
            unit: "ms p50 until each of \(files) SQLite files committed one row (synced, 64 threads)",
            baseline: nil, baselineLabel: nil, ratio: nil, ratioMeaning: nil,
            target: "reported: the floor of live-propagation-\(files) on this machine", met: nil)
        result.details = [
            "synced_64_threads_max_ms": overlapped.allCommittedMilliseconds.max() ?? 0,
            "synced_2_threads_p50_ms": Bench.percentile(synced.allCommittedMilliseconds, 50),
            "unsynced_2_threads_p50_ms": Bench.percentile(unsynced.allCommittedMilliseconds, 50),
            "cpu_ms_per_synced_commit": synced.cpuMillisecondsPerCommit,
            "cpu_ms_per_unsynced_commit": unsynced.cpuMillisecondsPerCommit,
            "files": Double(files), "rounds": Double(rounds),
        ]
        return result
    }

    /// The least two cores can do a round in with every engine in one
    /// process, from the same run: the server's CPU to send the change to
    /// each stream and a bare unsynced commit of one row into each store,
    /// spread over every core with nothing else (no receiving, parsing,
    /// cursor or event). Above the target, the target is out of this
    /// machine's reach whatever the engine does.
    static func withCPUFloor(_ propagation: BenchResult, commitFloor: BenchResult, devices: Int) -> BenchResult {
        guard let server = propagation.details["server_cpu_ms_per_change"],
            let commit = commitFloor.details["cpu_ms_per_unsynced_commit"]
        else { return propagation }
        let cores = Double(ProcessInfo.processInfo.activeProcessorCount)
        let floor = (server + commit) * Double(devices) / cores
        var result = propagation
        result.details["cpu_floor_ms"] = floor
        result.notes.append(
            String(
                format: "CPU floor of a round: (server %.3f ms + bare unsynced commit %.3f ms) × %d stores ÷ %.0f cores = %.1f ms",
                server, commit, devices, cores, floor))
        return result
    }

    /// A propagation figure: the p99 from a push's answer to the devices'
    /// store commits, beside the push round trip of the same run;
    /// `judged`: whether the run is one the target speaks of.
    static func propagationResult(name: String, unit: String, propagation: [Double], pushTimes: [Double], judged: Bool)
        -> BenchResult
    {
        let p99 = Bench.percentile(propagation, 99)
        let pushP50 = Bench.percentile(pushTimes, 50)
        var result = BenchResult(
            name: name, figure: p99, unit: unit,
            baseline: pushP50, baselineLabel: "push round trip p50, same run", ratio: pushP50 > 0 ? p99 / pushP50 : nil,
            ratioMeaning: "propagation p99 / push round trip p50",
            target: "p99 ≤ 50 ms at 1,000 devices and ≤ 2× the push round trip",
            met: judged ? p99 <= 50 && (pushP50 <= 0 || p99 / pushP50 <= 2) : nil)
        result.details = [
            "p50_ms": Bench.percentile(propagation, 50), "p99_ms": p99, "max_ms": propagation.max() ?? 0,
            "push_p50_ms": pushP50, "push_p99_ms": Bench.percentile(pushTimes, 99),
        ]
        return result
    }

    // MARK: Delivery to sockets

    /// The server's part alone: from a push's answer to the change's event
    /// arriving on each of `sockets` raw stream connections (one thread
    /// reads them all), with no device engine or store in the way.
    static func delivery(sockets count: Int, rounds: Int) async throws -> BenchResult {
        let (directory, server, http, base) = try await liveServer(connections: count)
        defer { http.stop() }
        _ = directory
        FileDescriptorLimit.raise(toAtLeast: count + 1024)
        let coordinator = try server.tokens.issue(user: "c-1", role: .coordinator, team: "t-1", ttl: nil)
        var sockets: [Int32] = []
        defer { sockets.forEach { close($0) } }
        for _ in 0..<count {
            guard let socket = openStream(port: http.port, token: coordinator, source: 1) else { break }
            sockets.append(socket)
        }
        // Wait until every stream is open and its backlog read.
        let openBy = Date() + 60
        while server.liveConnections < sockets.count && Date() < openBy { try await Task.sleep(for: .milliseconds(20)) }
        try await Task.sleep(for: .milliseconds(500))
        for socket in sockets { drain(socket) }

        let writer = try server.tokens.issue(user: "writer", role: .field, team: "t-1", ttl: nil)
        let client = UUID()
        let open = sockets
        var pushTimes: [Double] = []
        var delivery: [Double] = []
        var missed = 0
        for round in 0..<rounds {
            let uuid = UUID()
            let marker = Array(uuid.wireText.utf8)
            let request = try pushRequest(base, token: writer, client: client, seq: Int64(round + 1), uuid: uuid)
            let reader = Task.detached { awaitMarker(marker, on: open, within: 10) }
            let sent = DispatchTime.now().uptimeNanoseconds
            _ = try await TestSession.shared.data(for: request)
            let answered = DispatchTime.now().uptimeNanoseconds
            pushTimes.append(Double(answered - sent) / 1e6)
            let arrivals = await reader.value
            missed += sockets.count - arrivals.count
            delivery += arrivals.map { Double(Int64($0) - Int64(answered)) / 1e6 }
        }
        let p99 = Bench.percentile(delivery, 99)
        let pushP50 = Bench.percentile(pushTimes, 50)
        var result = BenchResult(
            name: "live-delivery-\(sockets.count)", figure: p99, unit: "ms p99 from push answer to the event on every socket",
            baseline: pushP50, baselineLabel: "push round trip p50, same run", ratio: pushP50 > 0 ? p99 / pushP50 : nil,
            ratioMeaning: "delivery p99 / push round trip p50", target: "reported: the server's share of propagation", met: nil)
        result.details = [
            "p50_ms": Bench.percentile(delivery, 50), "p99_ms": p99, "max_ms": delivery.max() ?? 0, "push_p50_ms": pushP50,
            "sockets": Double(sockets.count), "rounds": Double(rounds), "missed": Double(missed),
            "shared_page_reads": Double(server.sharedLivePages),
        ]
        return result
    }

    static func pushRequest(_ base: URL, token: String, client: UUID, seq: Int64, uuid: UUID) throws -> URLRequest {
        let mutation = Mutation(
            seq: seq, id: UUID(), op: .create, collection: "people", uuid: uuid, baseVersion: nil,
            data: Bench.recordObject(Int(seq)))
        var request = URLRequest(url: base.appendingPathComponent("v1/push"))
        request.httpMethod = "POST"
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try WireCoding.encode(PushRequest(clientID: client, mutations: [mutation]))
        return request
    }

    /// Reads whatever is waiting on a socket, without blocking.
    static func drain(_ socket: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while recv(socket, &buffer, buffer.count, Int32(MSG_DONTWAIT)) > 0 {}
    }

    /// When `marker` first arrived on each socket (monotonic nanoseconds).
    static func awaitMarker(_ marker: [UInt8], on sockets: [Int32], within seconds: Double) -> [UInt64] {
        var pending = Set(sockets.indices)
        var seen: [Int: [UInt8]] = [:]
        var arrivals: [UInt64] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(seconds * 1e9)
        while !pending.isEmpty && DispatchTime.now().uptimeNanoseconds < deadline {
            var pollers = pending.map { pollfd(fd: sockets[$0], events: Int16(POLLIN), revents: 0) }
            let indices = Array(pending)
            guard poll(&pollers, nfds_t(pollers.count), 100) > 0 else { continue }
            for (position, poller) in pollers.enumerated() where poller.revents & Int16(POLLIN) != 0 {
                let index = indices[position]
                let count = recv(poller.fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                guard count > 0 else { continue }
                var text = seen[index] ?? []
                text += buffer[0..<count]
                if contains(text, marker) {
                    arrivals.append(DispatchTime.now().uptimeNanoseconds)
                    pending.remove(index)
                    seen[index] = nil
                } else {
                    // Only the tail can hold the start of a marker split across reads.
                    seen[index] = Array(text.suffix(marker.count))
                }
            }
        }
        return arrivals
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard haystack.count >= needle.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if Array(haystack[start..<(start + needle.count)]) == needle { return true }
        }
        return false
    }

    // MARK: Idle connections

    /// `connections` idle streams held open on one `outpost serve`: its
    /// resident memory and CPU while idle, and a pull's p99 with and
    /// without them.
    static func idle(connections: Int) async throws -> [BenchResult] {
        let directory = try TemporaryDirectory(prefix: "outpost-bench-idle")
        let database = directory.path("server.sqlite")
        let server = try ServerProcess(
            database: database, threads: 8,
            extra: [
                "--connection-limit", String(connections + 512), "--connections-per-address", String(connections + 512),
                "--max-live-per-user", String(connections + 512),
            ])
        defer { server.stop() }
        try await waitUntilServing(server.url)
        let tokenServer = try SyncServer(database: try SQLiteServerDatabase(path: database), config: ServerConfig())
        let token = try tokenServer.tokens.issue(user: "idle", role: .field, team: "t-1", ttl: nil)
        FileDescriptorLimit.raise(toAtLeast: connections + 512)

        let quietPull = try await pullLatencies(server.url, token: token, count: 200)
        let rssBefore = residentMegabytes(server.process.processIdentifier)
        var sockets: [Int32] = []
        defer { sockets.forEach { close($0) } }
        for index in 0..<connections {
            // Spread over 127.0.0.x so one source address's ports never run out.
            guard let socket = openStream(port: server.port, token: token, source: UInt8(1 + index / 20_000)) else { break }
            sockets.append(socket)
        }
        try await Task.sleep(for: .seconds(2))
        let cpuStart = Bench.cpuSeconds(server.process.processIdentifier)
        try await Task.sleep(for: .seconds(5))
        let idleCPU = (Bench.cpuSeconds(server.process.processIdentifier) - cpuStart) / 5 * 100
        let rss = residentMegabytes(server.process.processIdentifier)
        let busyPull = try await pullLatencies(server.url, token: token, count: 200)
        let quietP99 = Bench.percentile(quietPull, 99)
        let busyP99 = Bench.percentile(busyPull, 99)
        var memory = BenchResult(
            name: "idle-connections-rss", figure: rss, unit: "MB server RSS with \(sockets.count) idle streams",
            baseline: rssBefore, baselineLabel: "RSS before they opened", ratio: nil, ratioMeaning: nil,
            target: "≤ 500 MB at 10,000", met: sockets.count >= connections ? rss <= 500 : nil)
        memory.details = ["open": Double(sockets.count), "idle_cpu_percent": idleCPU]
        if sockets.count < connections { memory.notes.append("only \(sockets.count) of \(connections) streams could be opened") }
        var pull = BenchResult(
            name: "pull-p99-with-idle-connections", figure: busyP99, unit: "ms",
            baseline: quietP99, baselineLabel: "pull p99 with none open", ratio: quietP99 > 0 ? busyP99 / quietP99 : nil,
            ratioMeaning: "with / without", target: "≤ 2× without", met: quietP99 > 0 ? busyP99 / quietP99 <= 2 : nil)
        pull.details = ["p50_ms": Bench.percentile(busyPull, 50), "quiet_p50_ms": Bench.percentile(quietPull, 50)]
        return [memory, pull]
    }

    static func pullLatencies(_ base: URL, token: String, count: Int) async throws -> [Double] {
        var times: [Double] = []
        for _ in 0..<count {
            var request = URLRequest(url: URL(string: "/v1/pull?collections=people&limit=100", relativeTo: base)!)
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            let start = DispatchTime.now().uptimeNanoseconds
            _ = try await TestSession.shared.data(for: request)
            times.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
        }
        return times
    }

    /// A raw socket from 127.0.0.`source` holding `GET /v1/stream` open.
    static func openStream(port: UInt16, token: String, source: UInt8) -> Int32? {
        let socket = socket(AF_INET, streamSocketType, 0)
        guard socket >= 0 else { return nil }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr("127.0.0.\(source)")
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = port.bigEndian
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        let ok = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0 && withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
        guard ok else {
            close(socket)
            return nil
        }
        let request = "GET /v1/stream?collections=people HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n"
        _ = request.withCString { send(socket, $0, strlen($0), 0) }
        return socket
    }

    static func residentMegabytes(_ pid: pid_t) -> Double {
        #if canImport(Darwin)
        return Double(ProcessTaskInfo.of(pid)?.pti_resident_size ?? 0) / 1_048_576
        #else
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return 0 }
        return (Double(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) / 1024
        #endif
    }
}
