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

extension OwnTablesBench {
    /// A row the app's backend writes (plain libpq, no Outpost) reaching a
    /// device that holds a live channel: from the backend's COMMIT returning
    /// to the device's engine reporting the change stored. The floor: a row
    /// another device of the same user pushes through Outpost into the same
    /// table, from the push's answer to the same report.
    static func backendToDevice(postgres: String, rounds: Int) async throws -> BenchResult {
        let directory = try TemporaryDirectory(prefix: "outpost-bench-own")
        let schema = try ScratchSchema(on: postgres)
        defer { schema.drop() }
        let url = schema.url(postgres)
        let backend = try PostgresDatabase(url: url, poolSize: 1)
        defer { backend.close() }
        try createAppTable(in: backend)
        _ = try SyncServer(database: backend, config: try mappedConfig(schema: schema.name))
        let token = try TokenStore(database: backend).issue(user: user, role: .field, team: team, ttl: nil)
        let config = directory.path("config.json")
        try writeConfig(schema: schema.name, to: config)
        let server = try ServerProcess(database: url, extra: ["--config", config])
        defer { server.stop() }

        let store = try deviceStore(directory.path("device.sqlite"))
        var options = SyncOptions()
        options.periodicInterval = nil
        options.requestTimeout = 60
        let engine = SyncEngine(store: store, transport: HTTPTransport.make(baseURL: server.url), token: token, options: options)
        let arrivals = Locked<[UUID: [UInt64]]>([:])
        let events = await engine.events()
        let listener = Task {
            for await event in events {
                guard case .received(let changes) = event else { continue }
                let now = DispatchTime.now().uptimeNanoseconds
                arrivals.withLock { arrivals in for change in changes { arrivals[change.uuid, default: []].append(now) } }
            }
        }
        defer { listener.cancel() }
        await engine.start()
        let deadline = Date() + 30
        while Date() < deadline, await engine.currentStatus.live != .live { try await Task.sleep(for: .milliseconds(10)) }
        guard await engine.currentStatus.live == .live else { throw CommandFailure("The device never held a live channel.") }
        // The server's share: the same changes read off a raw stream, no engine or store behind it.
        guard let socket = openStream(port: server.port, token: token) else { throw CommandFailure("No stream could be opened.") }
        defer { close(socket) }
        try await Task.sleep(for: .milliseconds(300))

        /// Waits up to 10 s for the `count`th arrival of `uuid`; when it came.
        func arrival(_ uuid: UUID, _ count: Int) async -> UInt64? {
            let until = Date() + 10
            while Date() < until {
                if let times = arrivals.withLock({ $0[uuid] }), times.count >= count { return times[count - 1] }
                try? await Task.sleep(for: .milliseconds(1))
            }
            return nil
        }
        func milliseconds(_ from: UInt64, _ to: UInt64) -> Double { Double(Int64(to) - Int64(from)) / 1e6 }

        // Even rounds insert a row, odd ones update the row just inserted.
        var backendTimes: [Double] = []
        var inserts: [Double] = []
        var updates: [Double] = []
        var onSocket: [Double] = []
        var missed = 0
        var last = UUID()
        for round in 0..<rounds {
            let inserting = round % 2 == 0
            if inserting { last = UUID() }
            let key = last
            let text = key.uuidString.lowercased()
            LiveBench.drain(socket)
            let reader = Task.detached { LiveBench.awaitMarker(Array(key.wireText.utf8), on: [socket], within: 10) }
            _ = try backend.write { sql in
                if inserting {
                    try sql.execute(
                        """
                        INSERT INTO fuel_logs (id, user_id, fleet_id, liters, price_per_liter, note)
                        VALUES (CAST(? AS uuid), ?, ?, 42.5, 1.799, 'entered at the office')
                        """, [.text(text), .text(user), .text(team)])
                } else {
                    try sql.execute(
                        "UPDATE fuel_logs SET liters = liters + 1, note = 'corrected at the office' WHERE id = CAST(? AS uuid)",
                        [.text(text)])
                }
            }
            let committed = DispatchTime.now().uptimeNanoseconds
            if let arrived = await arrival(key, inserting ? 1 : 2) {
                let latency = milliseconds(committed, arrived)
                backendTimes.append(latency)
                if inserting { inserts.append(latency) } else { updates.append(latency) }
            } else {
                missed += 1
            }
            if let arrived = await reader.value.first { onSocket.append(milliseconds(committed, arrived)) }
            try await Task.sleep(for: .milliseconds(20))
        }

        var pushTimes: [Double] = []
        var pushed: [Double] = []
        let client = UUID()
        for round in 0..<rounds {
            let uuid = UUID()
            LiveBench.drain(socket)
            let request = try pushRequest(server.url, token: token, client: client, seq: Int64(round + 1), uuid: uuid)
            let sent = DispatchTime.now().uptimeNanoseconds
            _ = try await TestSession.shared.data(for: request)
            let answered = DispatchTime.now().uptimeNanoseconds
            pushTimes.append(milliseconds(sent, answered))
            if let arrived = await arrival(uuid, 1) { pushed.append(milliseconds(answered, arrived)) } else { missed += 1 }
            try await Task.sleep(for: .milliseconds(20))
        }
        await engine.stop()
        await store.close()

        let p99 = Bench.percentile(backendTimes, 99)
        let floorP99 = Bench.percentile(pushed, 99)
        var result = BenchResult(
            name: "own-tables-backend-to-device", figure: p99, unit: "ms p99 from the backend's COMMIT to the live device's store",
            baseline: floorP99, baselineLabel: "ms p99 from another device's push answer to the same store (same table, same run)",
            ratio: floorP99 > 0 ? p99 / floorP99 : nil, ratioMeaning: "backend write p99 / device push p99",
            target: "p99 ≤ 50 ms on loopback", met: p99 <= 50 && missed == 0)
        result.details = [
            "p50_ms": Bench.percentile(backendTimes, 50), "p99_ms": p99, "max_ms": backendTimes.max() ?? 0,
            "insert_p50_ms": Bench.percentile(inserts, 50), "insert_p99_ms": Bench.percentile(inserts, 99),
            "update_p50_ms": Bench.percentile(updates, 50), "update_p99_ms": Bench.percentile(updates, 99),
            "push_to_device_p50_ms": Bench.percentile(pushed, 50), "push_to_device_p99_ms": floorP99,
            "push_round_trip_p50_ms": Bench.percentile(pushTimes, 50), "rounds": Double(rounds), "missed": Double(missed),
            "stream_p50_ms": Bench.percentile(onSocket, 50), "stream_p99_ms": Bench.percentile(onSocket, 99),
            "over_50_ms": Double(backendTimes.filter { $0 > 50 }.count), "first_round_ms": backendTimes.first ?? 0,
        ]
        result.notes = [
            "one row a transaction, \(rounds / 2 + rounds % 2) INSERTs and \(rounds / 2) UPDATEs, 20 ms apart; the device's engine in this process, `outpost serve` in its own"
        ]
        if missed > 0 { result.notes.append("\(missed) changes did not reach the device within 10 s") }
        return result
    }

    /// A raw socket holding `GET /v1/stream` of the mapped collection open.
    static func openStream(port: UInt16, token: String) -> Int32? {
        let socket = socket(AF_INET, streamSocketType, 0)
        guard socket >= 0 else { return nil }
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = port.bigEndian
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(socket)
            return nil
        }
        let request = "GET /v1/stream?collections=fuel_logs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n"
        _ = request.withCString { send(socket, $0, strlen($0), 0) }
        return socket
    }

    static func pushRequest(_ base: URL, token: String, client: UUID, seq: Int64, uuid: UUID) throws -> URLRequest {
        let mutation = Mutation(
            seq: seq, id: UUID(), op: .create, collection: "fuel_logs", uuid: uuid, baseVersion: nil, data: fuelLog(Int(seq)))
        var request = URLRequest(url: base.appendingPathComponent("v1/push"))
        request.httpMethod = "POST"
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try WireCoding.encode(PushRequest(clientID: client, mutations: [mutation]))
        return request
    }
}
