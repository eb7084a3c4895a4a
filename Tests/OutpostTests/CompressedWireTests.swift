import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting
import Testing

/// A stream read compressed as it arrives: curl hands over the body as
/// sent (never inflated without `--compressed`), and each piece is inflated
/// as soon as it comes.
final class CompressedStreamReader: Sendable {
    private struct State {
        var text = ""
        var failure: String?
    }

    private let state = Locked(State())
    let process: SpawnedProcess
    let headerFile: String

    init(_ url: URL, token: String, directory: TemporaryDirectory) throws {
        headerFile = directory.path("stream-head-\(UUID().uuidString)")
        process = try SpawnedProcess(
            URL(fileURLWithPath: "/usr/bin/curl"),
            ["-sN", "--http1.1", "-D", headerFile, "-H", "Authorization: Bearer \(token)", "-H", "Accept-Encoding: gzip",
             url.absoluteString],
            stdout: .pipe)
        let output = process.standardOutput!
        let state = self.state
        Thread {
            guard let inflater = InflateStream() else { return }
            while true {
                let piece = output.availableData
                if piece.isEmpty { return }
                do {
                    let plain = try inflater.inflate(piece)
                    state.withLock { $0.text += String(decoding: plain, as: UTF8.self) }
                } catch {
                    state.withLock { $0.failure = "the stream did not inflate: \(error)" }
                    return
                }
            }
        }.start()
    }

    deinit { process.killIfRunning(after: .zero) }

    /// Everything inflated so far.
    var text: String { state.current.text }
    var failure: String? { state.current.failure }

    /// The answer's headers, names in lowercase (once they have arrived).
    var headers: [String: String] {
        let head = (try? String(contentsOfFile: headerFile, encoding: .utf8)) ?? ""
        var fields: [String: String] = [:]
        for line in head.split(separator: "\r\n") {
            if let colon = line.firstIndex(of: ":") {
                fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return fields
    }

    /// Whether a whole `changes` event (up to its blank line) mentioning `needle` has arrived.
    func hasWholeChangesEvent(containing needle: String) -> Bool {
        text.components(separatedBy: "\n\n").dropLast().contains { $0.hasPrefix("event: changes") && $0.contains(needle) }
    }
}

/// Streams and answers compressed on the wire: each event is flushed as it
/// is sent, so it reaches the device whole at once, directly and through
/// the reverse proxies people put in front of a server.
@Suite("Compressed wire", .timeLimit(.minutes(3)))
struct CompressedWireTests {
    /// nil: straight to the server.
    @Test(arguments: [nil, ReverseProxy.Kind.haproxy, .nginx])
    func eachEventArrivesWholeAsSoonAsItIsSent(through kind: ReverseProxy.Kind?) async throws {
        if let kind { try #require(ReverseProxy.isInstalled(kind), "scripts/ensure-deps installs \(kind.rawValue)") }
        // Heartbeats 15 s apart: an event held back in the compressor would wait for the next one.
        let rig = try await LiveSyncRig(heartbeatSeconds: 15)
        var proxy: ReverseProxy?
        if let kind { proxy = try await ReverseProxy(kind, upstreamPort: rig.http.port) }
        let base = proxy?.base ?? rig.base
        try await waitUntilServing(base)
        let token = try rig.server.tokens.issue(user: "c-1", role: .coordinator, team: "t-1", ttl: nil)
        let reader = try CompressedStreamReader(
            URL(string: "/v1/stream?collections=people", relativeTo: base)!, token: token, directory: rig.directory)
        try await eventually("the first heartbeat", timeout: .seconds(30)) { reader.text.contains("event: heartbeat") }
        #expect(reader.headers["content-encoding"] == "gzip")
        #expect(reader.headers["vary"]?.contains("Accept-Encoding") == true)

        let worker = try rig.device("u-1", name: "worker")
        for round in 0..<3 {
            let name = "Compressed \(round) through \(kind?.rawValue ?? "nothing")"
            _ = try await worker.store.create(Person(name: name))
            try await worker.engine.sync()
            let committed = ContinuousClock.now
            try await eventually("the event for \(name), whole", timeout: .seconds(10)) {
                reader.hasWholeChangesEvent(containing: name)
            }
            let waited = ContinuousClock.now - committed
            #expect(waited < .seconds(1), "\(name) took \(waited), not sent at once")
        }
        #expect(reader.failure == nil)
    }

    /// The engine over URLSession offers gzip and deflate and is handed
    /// inflated answers: a download and a live stream through a relay that
    /// counts the bytes, which are a fraction of the JSON.
    @Test func theEngineSyncsThroughCompressedAnswersAndStreams() async throws {
        let rig = try await LiveSyncRig()
        let relay = try LinkRelay(targetPort: rig.http.port, link: LinkRelay.Link(bitsPerSecond: 1e9, roundTrip: .zero))
        defer { relay.stop() }
        let worker = try rig.device("u-1", name: "worker")
        for index in 0..<600 {
            _ = try await worker.store.create(Person(name: "Person number \(index) of the compressed download"))
        }
        try await worker.engine.sync()
        let plainBytes = try rig.plainPullBytes(user: "c-1", role: .coordinator)

        var options = SyncOptions()
        options.pullPageSize = 100
        let device = try rig.device("c-1", name: "coordinator", role: .coordinator, options: options, via: relay.url)
        let report = try await device.engine.sync()
        #expect(report.received >= 600)
        let carried = relay.bytesDown
        #expect(carried * 3 < plainBytes, "\(carried) bytes carried for \(plainBytes) bytes of JSON pages")

        await device.engine.start()
        try await eventually("live through the relay", timeout: LiveSyncTests.firstLive) {
            await device.engine.currentStatus.live == .live
        }
        let id = try await worker.store.create(Person(name: "Arrives by the compressed stream"))
        try await worker.engine.sync()
        try await eventually("the change came through the stream") { try await device.store.get(Person.self, id) != nil }
        await device.engine.stop()
    }

    /// The latency proxy is a link without a bandwidth limit: each
    /// request and answer pay the round trip, nothing more.
    @Test func theLatencyProxyAddsItsRoundTripOnly() async throws {
        let rig = try await LiveSyncRig()
        let proxy = try LatencyProxy(targetPort: rig.http.port, roundTrip: .milliseconds(150))
        defer { proxy.stop() }
        let base = URL(string: "http://127.0.0.1:\(proxy.port)")!
        let started = ContinuousClock.now
        let (data, response) = try await TestSession.shared.data(from: URL(string: "/v1/health", relativeTo: base)!)
        let took = ContinuousClock.now - started
        #expect((response as? HTTPURLResponse)?.statusCode == 200 && !data.isEmpty)
        #expect(took >= .milliseconds(150), "\(took)")
    }

    @Test func aLinkIsPacedToItsBandwidthAndRoundTrip() async throws {
        let rig = try await LiveSyncRig()
        // 2 Mbit/s and 100 ms: 250 kB take a second on the line.
        let relay = try LinkRelay(targetPort: rig.http.port, link: try LinkRelay.Link(parsing: "2mbit:100ms"))
        defer { relay.stop() }
        let started = ContinuousClock.now
        let (_, response) = try await TestSession.shared.data(from: URL(string: "/v1/health", relativeTo: relay.url)!)
        let first = ContinuousClock.now - started
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        // The request's way there and the answer's way back: a round trip at
        // least (the relay accepts the connection itself, at once).
        #expect(first >= .milliseconds(100), "\(first)")
        #expect(relay.bytesDown > 0 && relay.bytesUp > 0)

        // A body the server reads to its end before refusing it.
        let token = try rig.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)
        var request = URLRequest(url: URL(string: "/v1/push", relativeTo: relay.url)!)
        request.httpMethod = "POST"
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(repeating: UInt8(ascii: "x"), count: 250_000)
        let before = relay.bytesUp
        let sending = ContinuousClock.now
        _ = try await TestSession.shared.data(for: request)
        let took = ContinuousClock.now - sending
        #expect(relay.bytesUp - before >= 250_000)
        #expect(took >= .milliseconds(950), "250 kB at 2 Mbit/s took \(took)")
    }

    @Test func aLinkThatIsNotOneIsAClearError() {
        for good in ["10mbit:50ms", "1.5MBIT:0.2s", "512kbit:0ms", "1gbit:1ms"] {
            #expect((try? LinkRelay.Link(parsing: good)) != nil, "\(good)")
        }
        #expect((try? LinkRelay.Link(parsing: "10mbit:50ms"))?.bitsPerSecond == 10e6)
        #expect((try? LinkRelay.Link(parsing: "1.5mbit:0.2s"))?.roundTrip == .milliseconds(200))
        for bad in ["", "10mbit", "10:50ms", "fast:50ms", "0mbit:50ms", "-1mbit:5ms", "10mbit:-5ms", "10mbit:50", "10mbit:50ms:1", "10mb:50ms"] {
            #expect(throws: LinkRelay.LinkError.self, "\(bad)") { try LinkRelay.Link(parsing: bad) }
        }
        do {
            _ = try LinkRelay.Link(parsing: "fast")
            Issue.record("'fast' was taken for a link")
        } catch {
            #expect("\(error)".contains("such as 10mbit:50ms"), "the error shows what a link looks like: \(error)")
        }
    }
}

extension LiveSyncRig {
    /// The bytes of every page of `user`'s download, as JSON (in process, never compressed).
    func plainPullBytes(user: String, role: Role) throws -> Int {
        let token = try server.tokens.issue(user: user, role: role, team: "t-1", ttl: nil)
        var cursor: String?
        var total = 0
        while true {
            var target = "/v1/pull?collections=people,visits&limit=100"
            if let cursor { target += "&cursor=\(cursor)" }
            let answer = server.handle(HTTPRequest(method: "GET", target: target, headers: ["Authorization": "Bearer \(token)"]))
            total += answer.body.count
            let page = try WireCoding.decode(PullResponse.self, from: Data(answer.body))
            cursor = page.cursor.rawValue
            if !page.hasMore { return total }
        }
    }
}
