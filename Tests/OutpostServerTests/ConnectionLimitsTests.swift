import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Hundreds of phones behind one office or carrier address: once signed
/// in, they are bounded by their users' live cap and the server's total,
/// not by their address; what the address's share still stops is sockets
/// that never authenticate (idle, or trickling their headers). A request
/// over any limit is answered `503` with `Retry-After`, never a reset.
///
/// Every scenario runs its sockets on a thread of its own: its timing must
/// not wait on the cooperative pool, which other tests may hold for seconds.
@Suite("Connection limits for a fleet behind one address", .serialized, .timeLimit(.minutes(4)))
struct ConnectionLimitsTests {
    /// A server whose address share (64) and header deadline (3 s) are small, so floods exceed them quickly.
    static func server(
        total: Int = 4096, perAddress: Int = 64, livePerUser: Int = 16, headerDeadline: Int = 3, heartbeat: Int = 15
    ) throws -> LiveServer {
        var config = try ServerConfig()
        config.connections = try ConnectionLimits(
            total: total, perAddress: perAddress, idleTimeoutSeconds: 30, livePerUser: livePerUser)
        config.connections.headerDeadlineSeconds = headerDeadline
        config.heartbeatSeconds = heartbeat
        return try LiveServer(.sqlite, config: config)
    }

    @Test func aThousandStreamsFromOneAddressAreHeldWhileFloodsFromItAndAnotherAreCutOff() async throws {
        FileDescriptorLimit.raise(toAtLeast: 8192)
        let live = try Self.server()
        let port = live.http.port
        let tokens = try (0..<200).map { try live.token("u-\($0)", team: "t-\($0 % 10)") }
        let writer = try live.token("writer", team: "t-1")
        let server = live.server
        let gate = live.http.gate
        let deadline = Duration.seconds(3)

        struct Outcome: Sendable {
            var held = 0
            var liveWhileFlooded = 0
            var pull = 0, push = 0
            var pullTime = Duration.zero, pushTime = Duration.zero
            var floodClosings: [Duration] = []
            var floodSize = 0
            var lateClosings: [Duration] = []
            var mostUnprovenFromTheStreamsAddress = 0
            var streamsClosed = 0
            var liveAfter = 0
        }
        let outcome = try await RawHTTP.onThread { () throws -> Outcome in
            var outcome = Outcome()
            // 1,000 streams: five for each of 200 users, all from 127.0.0.1, eight opening at a time.
            let streams = try StreamFleet.open(count: 1000, port: port, from: "127.0.0.1", width: 8) { tokens[$0 % 200] }
            defer { streams.forEach { close($0) } }
            outcome.held = streams.count
            // A flood from another address and from the streams' own: idle sockets and header tricklers.
            let flood = try HeaderFlood(port: port, sources: ["127.0.0.2", "127.0.0.1"], idle: 150, trickling: 150)
            defer { flood.close() }
            outcome.floodSize = flood.sockets.count
            // Every flood socket is closed by the server: past the share at once, the rest at the deadline.
            let closings = Background { flood.closedByServer(within: .seconds(20)) }
            // While it runs, a pull and a push from the streams' address are answered.
            let pullStarted = ContinuousClock.now
            outcome.pull = (try? RawHTTP.get(port: port, "/v1/pull?collections=people", token: tokens[0]))?.status ?? 0
            outcome.pullTime = ContinuousClock.now - pullStarted
            let push = Data(#"{"client_id":"8f0c2a4e-4b7e-4d5c-9a41-3c9d2f6b7e10","mutations":[]}"#.utf8)
            let pushStarted = ContinuousClock.now
            outcome.push = (try? RawHTTP.push(port: port, token: writer, body: push))?.status ?? 0
            outcome.pushTime = ContinuousClock.now - pushStarted
            outcome.mostUnprovenFromTheStreamsAddress = gate.unprovenConnections(from: RawSocket.loopback)
            outcome.liveWhileFlooded = server.liveConnections
            outcome.floodClosings = try closings.value()
            // The streams were never touched.
            outcome.streamsClosed = RawSocket.closings(of: streams, since: .now, until: .now + .milliseconds(500)).count
            outcome.liveAfter = server.liveConnections
            return outcome
        }
        let slowest = outcome.floodClosings.max() ?? .zero
        print(
            "ConnectionLimits[1000 streams]: \(outcome.held) held; pull \(outcome.pull) in \(outcome.pullTime), push \(outcome.push) in \(outcome.pushTime) "
                + "during a flood of \(outcome.floodSize); \(outcome.floodClosings.count) flood sockets closed by the server, "
                + "the last after \(slowest); \(outcome.streamsClosed) streams closed; \(outcome.liveAfter) live after")
        #expect(outcome.held == 1000, "\(outcome.held) of 1000 streams got their 200 head")
        #expect(outcome.liveWhileFlooded == 1000)
        #expect(outcome.pull == 200 && outcome.push == 200, "pull \(outcome.pull), push \(outcome.push) during the flood")
        #expect(outcome.floodClosings.count == outcome.floodSize, "\(outcome.floodClosings.count) of \(outcome.floodSize) flood sockets closed")
        // The deadline, the scan's half second, and room for a loaded machine.
        #expect(slowest < deadline + .seconds(4), "the last flood socket was closed after \(slowest)")
        // Past the address's share, the oldest waiting sockets went at once, long before the deadline.
        #expect(outcome.floodClosings.filter { $0 < deadline }.count >= outcome.floodSize - 2 * 64)
        #expect(outcome.mostUnprovenFromTheStreamsAddress <= 64 + 2)
        #expect(outcome.streamsClosed == 0, "\(outcome.streamsClosed) streams were closed")
        #expect(outcome.liveAfter == 1000)
    }

    @Test func theSeventeenthLiveChannelOfOneUserIs503WithRetryAfter() async throws {
        let live = try Self.server(heartbeat: 1)
        let port = live.http.port
        let token = try live.token("u-1")
        let other = try live.token("u-2")
        let server = live.server
        struct Outcome: Sendable {
            var held = 0
            var stream: HostileSocket.Reply?
            var longPoll: HostileSocket.Reply?
            var otherUser = 0
            var afterOneClosed = 0
        }
        let outcome = try await RawHTTP.onThread { () throws -> Outcome in
            var outcome = Outcome()
            var streams = try StreamFleet.open(count: 16, port: port, from: "127.0.0.1", width: 1) { _ in token }
            defer { streams.forEach { close($0) } }
            outcome.held = streams.count
            outcome.stream = try RawHTTP.get(port: port, "/v1/stream?collections=people", token: token)
            outcome.longPoll = try RawHTTP.get(port: port, "/v1/pull?collections=people&wait=30", token: token)
            let another = try StreamFleet.open(count: 1, port: port, from: "127.0.0.1", width: 1) { _ in other }
            outcome.otherUser = another.count
            another.forEach { close($0) }
            // A stream that ends gives its place back (noticed at its next heartbeat).
            close(streams.removeLast())
            let until = ContinuousClock.now + .seconds(10)
            while server.liveHub.count(of: "u-1") > 15 && ContinuousClock.now < until { usleep(50_000) }
            outcome.afterOneClosed = (try? StreamFleet.open(count: 1, port: port, from: "127.0.0.1", width: 1) { _ in token })
                .map { fds in
                    fds.forEach { close($0) }
                    return fds.count
                } ?? 0
            return outcome
        }
        #expect(outcome.held == 16)
        for (name, reply) in [("stream", outcome.stream), ("long poll", outcome.longPoll)] {
            let reply = try #require(reply, "the 17th \(name) got no answer")
            #expect(reply.status == 503, "the 17th \(name) answered \(reply.status)")
            #expect(reply.headers["retry-after"].flatMap(Int.init) ?? 0 > 0, "the 17th \(name) has no Retry-After")
            let error = try WireCoding.decode(ErrorBody.self, from: Data(reply.body))
            #expect(error.code == .unavailable)
            #expect(error.message.contains("16 live connections"), "\(error.message)")
        }
        #expect(outcome.otherUser == 1, "another user's stream is not held back")
        #expect(outcome.afterOneClosed == 1, "a place freed by a closed stream is taken again")
    }

    @Test func aRequestPastTheServersTotalIs503WithRetryAfterAndTheConnectionCloses() async throws {
        let live = try Self.server(total: 8, perAddress: 8)
        let port = live.http.port
        let tokens = try (0..<8).map { try live.token("u-\($0)") }
        let outcome = try await RawHTTP.onThread { () throws -> (held: Int, health: HostileSocket.Reply, pull: HostileSocket.Reply) in
            let streams = try StreamFleet.open(count: 8, port: port, from: "127.0.0.1", width: 1) { tokens[$0] }
            defer { streams.forEach { close($0) } }
            // The ninth connection: nothing waiting for headers can be cut to make room.
            let health = try RawHTTP.get(port: port, "/v1/health")
            let pull = try RawHTTP.get(port: port, "/v1/pull?collections=people", token: tokens[0])
            return (streams.count, health, pull)
        }
        #expect(outcome.held == 8)
        for reply in [outcome.health, outcome.pull] {
            #expect(reply.status == 503)
            #expect(reply.headers["retry-after"] == "10")
            #expect(reply.headers["connection"]?.lowercased() == "close")
            let error = try WireCoding.decode(ErrorBody.self, from: Data(reply.body))
            #expect(error.code == .unavailable)
        }
    }

    @Test func overTheAddressShareARequestWithoutATokenIs503AndOneWithATokenIsServed() async throws {
        let live = try Self.server(perAddress: 4)
        let port = live.http.port
        let token = try live.token("u-1")
        struct Outcome: Sendable {
            var health: HostileSocket.Reply?
            var pushWithToken: HostileSocket.Reply?
            var pull = 0
            var stream = 0
        }
        let outcome = try await RawHTTP.onThread { () throws -> Outcome in
            // Four requests under way from 127.0.0.2 without a token: headers sent, the body trickling.
            let underWay = try (0..<4).map { _ in
                let fd = try RawSocket.connect(port: port, from: "127.0.0.2")
                HostileSocket.sendAll(
                    fd,
                    Array("POST /v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{".utf8))
                return fd
            }
            defer { underWay.forEach { close($0) } }
            usleep(300_000)
            var outcome = Outcome()
            // Nothing of the address's share can be cut: no token, 503; a body with a token could hold the slot, 503.
            outcome.health = try? RawSocket.exchange(port: port, from: "127.0.0.2", "GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            outcome.pushWithToken = try? RawSocket.exchange(
                port: port, from: "127.0.0.2",
                "POST /v1/push HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
            // A token and no body: checked at once, and served.
            outcome.pull = (try? RawSocket.exchange(
                port: port, from: "127.0.0.2",
                "GET /v1/pull?collections=people HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nConnection: close\r\n\r\n"))?.status ?? 0
            let streams = try StreamFleet.open(count: 1, port: port, from: "127.0.0.2", width: 1) { _ in token }
            outcome.stream = streams.count
            streams.forEach { close($0) }
            return outcome
        }
        for (name, reply) in [("health", outcome.health), ("push with a body", outcome.pushWithToken)] {
            let reply = try #require(reply, "\(name) got no answer")
            #expect(reply.status == 503, "\(name) answered \(reply.status)")
            #expect(reply.headers["retry-after"] == "5")
            #expect((try? WireCoding.decode(ErrorBody.self, from: Data(reply.body)))?.code == .unavailable)
        }
        #expect(outcome.pull == 200)
        #expect(outcome.stream == 1)
    }

    @Test func theLiveCapComesFromTheConfigurationAndBadValuesAreRefused() throws {
        let directory = try TemporaryDirectory(prefix: "outpost-config")
        let path = directory.path("config.json")
        let collections = #""collections": [{"name": "notes", "fields": {"text": {"type": "text"}}}]"#
        func load(_ extra: String) throws -> ServerConfig {
            try Data("{\(collections)\(extra)}".utf8).write(to: URL(fileURLWithPath: path))
            return try ServerConfig.load(path: path)
        }
        #expect(try load("").connections.livePerUser == 16)
        #expect(try load(#", "max_live_per_user": 40"#).connections.livePerUser == 40)
        for bad in ["0", "-1", "100001"] {
            #expect(throws: ConfigError.self, "max_live_per_user \(bad)") { try load(#", "max_live_per_user": \#(bad)"#) }
        }
    }
}

/// The gate alone, on socket pairs: which connection it cuts, and when.
@Suite("Connection gate", .timeLimit(.minutes(1)))
struct ConnectionGateTests {
    /// A connected pair: the gate gets one end, the test watches the other.
    final class Pair {
        let gateEnd: Int32
        let peerEnd: Int32
        init() throws {
            var ends: [Int32] = [0, 0]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0 else {
                throw HostileSocket.Failure(description: "socketpair() failed: errno \(errno)")
            }
            gateEnd = ends[0]
            peerEnd = ends[1]
        }
        /// Whether the gate's end was shut down (the peer reads its end).
        var wasCut: Bool {
            var byte: UInt8 = 0
            return recv(peerEnd, &byte, 1, Int32(MSG_DONTWAIT)) == 0
        }
        deinit {
            close(gateEnd)
            close(peerEnd)
        }
    }

    @Test func pastItsShareAnAddressLosesItsOldestConnectionStillWaitingForHeaders() throws {
        let gate = ConnectionGate(total: 100, perAddress: 3, headerDeadlineSeconds: 60)
        defer { gate.stop() }
        let pairs = try (0..<5).map { _ in try Pair() }
        let first = gate.opened(address: 7, socket: pairs[0].gateEnd)
        let second = gate.opened(address: 7, socket: pairs[1].gateEnd)
        // The first sends a whole request: it can no longer be cut.
        #expect(gate.headersArrived(first, mayPass: false) == nil)
        _ = gate.opened(address: 7, socket: pairs[2].gateEnd)
        #expect(!pairs.contains { $0.wasCut })
        _ = gate.opened(address: 7, socket: pairs[3].gateEnd)
        #expect(pairs[1].wasCut, "the oldest still waiting for headers")
        #expect(!pairs[0].wasCut && !pairs[2].wasCut && !pairs[3].wasCut)
        #expect(gate.unprovenConnections(from: 7) == 3)
        // Another address has a share of its own.
        _ = gate.opened(address: 8, socket: pairs[4].gateEnd)
        #expect(!pairs[4].wasCut)
        #expect(gate.openConnections == 4)
        gate.closed(second)
        #expect(gate.openConnections == 4, "a cut connection is counted once")
    }

    @Test func provenConnectionsLeaveTheirAddressShareAndAreNeverCut() throws {
        let gate = ConnectionGate(total: 100, perAddress: 2, headerDeadlineSeconds: 5)
        defer { gate.stop() }
        let pairs = try (0..<6).map { _ in try Pair() }
        var proven: [GatedConnection] = []
        for pair in pairs.prefix(4) {
            let connection = gate.opened(address: 7, socket: pair.gateEnd)
            #expect(gate.headersArrived(connection, mayPass: true) == nil)
            gate.prove(connection)
            proven.append(connection)
        }
        #expect(gate.unprovenConnections(from: 7) == 0)
        for connection in proven { _ = gate.requestEnded(connection) }
        let waiting = gate.opened(address: 7, socket: pairs[4].gateEnd)
        _ = gate.opened(address: 7, socket: pairs[5].gateEnd)
        // Long past every deadline: only the unproven ones waiting for headers go.
        let cut = gate.cutExpired(now: DispatchTime.now().uptimeNanoseconds + 10_000_000_000)
        #expect(cut == 2)
        #expect(pairs[4].wasCut && pairs[5].wasCut)
        #expect(!pairs.prefix(4).contains { $0.wasCut })
        #expect(gate.openConnections == 4)
        gate.closed(waiting)
        #expect(gate.openConnections == 4)
    }

    @Test func anUnprovenConnectionWaitsUnderTheDeadlineAgainAfterEachAnswer() throws {
        let gate = ConnectionGate(total: 100, perAddress: 10, headerDeadlineSeconds: 5)
        defer { gate.stop() }
        let pair = try Pair()
        let connection = gate.opened(address: 7, socket: pair.gateEnd)
        #expect(gate.headersArrived(connection, mayPass: false) == nil)
        // Under way: no deadline.
        #expect(gate.cutExpired(now: DispatchTime.now().uptimeNanoseconds + 20_000_000_000) == 0)
        _ = gate.requestEnded(connection)
        #expect(gate.cutExpired(now: DispatchTime.now().uptimeNanoseconds + 2_000_000_000) == 0)
        #expect(gate.cutExpired(now: DispatchTime.now().uptimeNanoseconds + 7_000_000_000) == 1)
        #expect(pair.wasCut)
    }

    @Test func pastTheTotalTheOldestWaitingConnectionOfAnyAddressMakesRoom() throws {
        let gate = ConnectionGate(total: 2, perAddress: 2, headerDeadlineSeconds: 60)
        defer { gate.stop() }
        let pairs = try (0..<3).map { _ in try Pair() }
        _ = gate.opened(address: 1, socket: pairs[0].gateEnd)
        _ = gate.opened(address: 2, socket: pairs[1].gateEnd)
        _ = gate.opened(address: 3, socket: pairs[2].gateEnd)
        #expect(pairs[0].wasCut, "the oldest waiting, from another address")
        #expect(!pairs[1].wasCut && !pairs[2].wasCut)
        #expect(gate.openConnections == 2)
    }

    @Test func pastTheTotalWithNothingToCutTheNewcomersRequestIsRefusedUntilThereIsRoom() throws {
        let gate = ConnectionGate(total: 1, perAddress: 1, headerDeadlineSeconds: 60)
        defer { gate.stop() }
        let pairs = try (0..<3).map { _ in try Pair() }
        let holder = gate.opened(address: 1, socket: pairs[0].gateEnd)
        #expect(gate.headersArrived(holder, mayPass: true) == nil)
        gate.prove(holder)
        let newcomer = gate.opened(address: 1, socket: pairs[1].gateEnd)
        #expect(gate.headersArrived(newcomer, mayPass: true) == .total, "a token does not pass the total")
        let late = gate.opened(address: 2, socket: pairs[2].gateEnd)
        #expect(!pairs.contains { $0.wasCut }, "a proven connection is never cut")
        gate.closed(holder)
        gate.closed(newcomer)
        #expect(gate.headersArrived(late, mayPass: false) == nil, "room again once the others closed")
    }

    @Test func overTheShareWithNothingToCutOnlyARequestWithATokenAndNoBodyPasses() throws {
        let gate = ConnectionGate(total: 100, perAddress: 1, headerDeadlineSeconds: 60)
        defer { gate.stop() }
        let pairs = try (0..<3).map { _ in try Pair() }
        let underWay = gate.opened(address: 7, socket: pairs[0].gateEnd)
        #expect(gate.headersArrived(underWay, mayPass: false) == nil)
        let plain = gate.opened(address: 7, socket: pairs[1].gateEnd)
        #expect(gate.headersArrived(plain, mayPass: false) == .address)
        let signed = gate.opened(address: 7, socket: pairs[2].gateEnd)
        #expect(gate.headersArrived(signed, mayPass: true) == nil)
        #expect(!pairs.contains { $0.wasCut })
        // The refused one closes after its answer: it no longer counts.
        #expect(gate.unprovenConnections(from: 7) == 2)
        #expect(gate.openConnections == 2)
    }
}

/// Live streams from a chosen loopback source address, each holding its `200` head.
enum StreamFleet {
    /// `count` streams from `source`, `width` opening at a time; each has
    /// its `200` head before this returns. Throws with the first refusal.
    static func open(count: Int, port: UInt16, from source: String, width: Int, token: @escaping @Sendable (Int) -> String)
        throws -> [Int32]
    {
        let opened = Locked<[Int32]>([])
        let failure = Locked<String?>(nil)
        let queue = HostileRunner.Queue(count: count)
        let group = DispatchGroup()
        for _ in 0..<width {
            group.enter()
            Thread {
                defer { group.leave() }
                while failure.current == nil, let index = queue.take() {
                    do {
                        let fd = try openOne(port: port, from: source, token: token(index))
                        opened.withLock { $0.append(fd) }
                    } catch {
                        failure.withLock { $0 = $0 ?? "stream \(index): \(error)" }
                    }
                }
            }.start()
        }
        guard group.wait(timeout: .now() + 120) == .success else {
            opened.current.forEach { close($0) }
            throw HostileSocket.Failure(description: "\(count) streams were not open within 120 s")
        }
        if let failure = failure.current {
            opened.current.forEach { close($0) }
            throw HostileSocket.Failure(description: failure)
        }
        return opened.current
    }

    private static func openOne(port: UInt16, from source: String, token: String) throws -> Int32 {
        let fd = try RawSocket.connect(port: port, from: source)
        let request = "GET /v1/stream?collections=people HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n"
        HostileSocket.sendAll(fd, Array(request.utf8))
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while HostileSocket.find([13, 10, 13, 10], in: received[...]) == nil {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else {
                let error = errno
                close(fd)
                throw HostileSocket.Failure(description: "the stream ended before its head (errno \(error))")
            }
            received += chunk[0..<count]
        }
        let statusLine = String(decoding: received.prefix { $0 != 13 }, as: UTF8.self)
        guard statusLine.hasPrefix("HTTP/1.1 200") else {
            close(fd)
            throw HostileSocket.Failure(description: "the stream was answered \(statusLine): \(String(decoding: received, as: UTF8.self))")
        }
        return fd
    }
}
