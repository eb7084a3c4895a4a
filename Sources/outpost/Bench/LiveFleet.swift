import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting

/// Device engines on one live server, each on a store of its own, with the
/// moment each change reached each device's store (the engine's `received`
/// event, sent after the page and its cursor committed).
struct LiveFleet {
    let engines: [SyncEngine]
    let listeners: [Task<Void, Never>]
    /// Per record uuid: when each device's store committed it (monotonic nanoseconds).
    let arrivals = Locked<[UUID: [UInt64]]>([:])

    /// `devices` coordinators of team t-1, started. With `before`, they
    /// start one at a time: `before(index)` runs first, and each device
    /// holds its live channel before the next one starts.
    init(
        devices: Int, server: SyncServer, base: URL, directory: TemporaryDirectory,
        before: ((Int) async throws -> Void)? = nil
    ) async throws {
        var engines: [SyncEngine] = []
        var listeners: [Task<Void, Never>] = []
        let arrivals = self.arrivals
        // One transport for the fleet, as an app holding many engines would
        // share one: a transport per engine meant a network thread per
        // engine, a thousand of them woken by each change.
        let transport = HTTPTransport.make(baseURL: base)
        for index in 0..<devices {
            let store = try LocalStore(path: directory.path("d\(index).sqlite"), collections: [CollectionDescriptor(name: "people")])
            var options = SyncOptions()
            options.periodicInterval = nil
            options.requestTimeout = 60
            let engine = SyncEngine(
                store: store, transport: transport,
                token: try server.tokens.issue(user: "c-\(index)", role: .coordinator, team: "t-1", ttl: nil), options: options,
                seed: UInt64(index + 1))
            let events = await engine.events()
            listeners.append(Task {
                for await event in events {
                    guard case .received(let changes) = event else { continue }
                    let now = DispatchTime.now().uptimeNanoseconds
                    arrivals.withLock { arrivals in for change in changes { arrivals[change.uuid, default: []].append(now) } }
                }
            })
            engines.append(engine)
        }
        self.engines = engines
        self.listeners = listeners
        if let before {
            for (index, engine) in engines.enumerated() {
                try await before(index)
                await engine.start()
                let deadline = Date() + 30
                while Date() < deadline, await engine.currentStatus.live != .live { try await Task.sleep(for: .milliseconds(10)) }
            }
            return
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for engine in engines { group.addTask { await engine.start() } }
            try await group.waitForAll()
        }
    }

    /// Waits (up to two minutes) until every device holds a live channel,
    /// then says how they wait: on a stream, on long polls (a stream judged
    /// held back), and how long it took.
    func channels() async -> (streaming: Int, polling: Int, seconds: Double) {
        let starting = DispatchTime.now().uptimeNanoseconds
        let deadline = Date() + 120
        while Date() < deadline {
            var live = 0
            for engine in engines where await engine.currentStatus.live == .live { live += 1 }
            if live == engines.count { break }
            try? await Task.sleep(for: .milliseconds(50))
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - starting) / 1e9
        var streaming = 0
        var polling = 0
        for engine in engines {
            switch await engine.currentStatus.live {
            case .live: streaming += 1
            case .polling: polling += 1
            default: break
            }
        }
        return (streaming, polling, seconds)
    }

    /// Waits up to `seconds` until every device stored the record `uuid`;
    /// the moments they did.
    func arrivals(of uuid: UUID, within seconds: Double) async -> [UInt64] {
        let deadline = Date() + seconds
        while Date() < deadline, (arrivals.withLock { $0[uuid]?.count ?? 0 }) < engines.count {
            try? await Task.sleep(for: .milliseconds(1))
        }
        return arrivals.withLock { $0[uuid] ?? [] }
    }

    func stop() async {
        for engine in engines { await engine.stop() }
        listeners.forEach { $0.cancel() }
    }
}
