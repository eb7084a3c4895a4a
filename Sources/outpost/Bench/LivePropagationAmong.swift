import Foundation
import OutpostCore
import OutpostServer
import OutpostTesting

extension LiveBench {
    /// Propagation as one device meets it on a server with `devices` live
    /// devices connected: `observers` device engines and, for the others,
    /// raw stream connections in the same team (every one is sent every
    /// change, and one thread reads them all as it comes). The observers
    /// connect at even intervals among the others, so that together they
    /// meet every place in the server's order of delivery. Each phone does
    /// its own work on its own processor; with every device's engine in
    /// this process (`propagation`), the figure is mostly the two cores
    /// running a thousand engines in turn, not the time a change takes to
    /// reach a device.
    static func propagationAmong(devices: Int, observers: Int, rounds: Int) async throws -> BenchResult {
        let (directory, server, http, base) = try await liveServer(connections: devices)
        defer { http.stop() }
        FileDescriptorLimit.raise(toAtLeast: devices + 1024)
        let coordinator = try server.tokens.issue(user: "c-sockets", role: .coordinator, team: "t-1", ttl: nil)
        let sockets = Locked<[Int32]>([])
        defer { sockets.withLock { $0.forEach { close($0) } } }
        let others = devices - observers
        func openSockets(upTo count: Int) {
            sockets.withLock { sockets in
                while sockets.count < count, let socket = openStream(port: http.port, token: coordinator, source: 1) {
                    sockets.append(socket)
                }
            }
        }
        let fleet = try await LiveFleet(devices: observers, server: server, base: base, directory: directory) { index in
            openSockets(upTo: others * (index + 1) / (observers + 1))
        }
        openSockets(upTo: others)
        let open = sockets.withLock { $0 }
        defer { fleet.listeners.forEach { $0.cancel() } }
        let (streaming, polling, _) = await fleet.channels()
        let connected = open.count + streaming
        // Every stream open and its backlog read before the rounds begin.
        let openBy = Date() + 60
        while server.liveConnections < connected && Date() < openBy { try await Task.sleep(for: .milliseconds(20)) }
        try await Task.sleep(for: .milliseconds(500))
        for socket in open { drain(socket) }

        let writer = try server.tokens.issue(user: "writer", role: .field, team: "t-1", ttl: nil)
        let client = UUID()
        var pushTimes: [Double] = []
        var propagation: [Double] = []
        var delivery: [Double] = []
        var missed = 0
        var missedOnSockets = 0
        for round in 0..<rounds {
            let uuid = UUID()
            let request = try pushRequest(base, token: writer, client: client, seq: Int64(round + 1), uuid: uuid)
            // The sockets are read while the observers store the change, as
            // phones read their own streams.
            let marker = Array(uuid.wireText.utf8)
            let reader = Task.detached { awaitMarker(marker, on: open, within: 10) }
            let sent = DispatchTime.now().uptimeNanoseconds
            _ = try await TestSession.shared.data(for: request)
            let answered = DispatchTime.now().uptimeNanoseconds
            pushTimes.append(Double(answered - sent) / 1e6)
            let times = await fleet.arrivals(of: uuid, within: 10)
            missed += observers - times.count
            propagation += times.map { Double(Int64($0) - Int64(answered)) / 1e6 }
            let reached = await reader.value
            missedOnSockets += open.count - reached.count
            delivery += reached.map { Double(Int64($0) - Int64(answered)) / 1e6 }
            try await Task.sleep(for: .milliseconds(20))
        }
        await fleet.stop()

        var result = propagationResult(
            name: "live-propagation-among-\(connected)",
            unit: "ms p99 from push answer to store commit, \(observers) device engines among \(connected) live devices",
            propagation: propagation, pushTimes: pushTimes, judged: connected >= 1_000)
        result.details.merge([
            "devices": Double(connected), "observers": Double(observers), "rounds": Double(rounds), "missed": Double(missed),
            "socket_delivery_p99_ms": Bench.percentile(delivery, 99), "missed_on_sockets": Double(missedOnSockets),
            "observers_on_streams": Double(streaming), "observers_on_long_polls": Double(polling),
        ]) { _, new in new }
        result.notes = [
            "the other \(open.count) devices are raw stream connections of the same team, read by one thread as the changes come"
        ]
        if streaming < observers { result.notes.append("\(observers - streaming) observers were not on a stream when the rounds began") }
        if missed > 0 { result.notes.append("\(missed) arrivals at observers did not come within 10 s") }
        if missedOnSockets > 0 { result.notes.append("\(missedOnSockets) arrivals on sockets did not come within 10 s") }
        return result
    }
}
