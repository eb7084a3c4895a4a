#if canImport(Glibc)
import Foundation
import Glibc
@testable import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting
import Testing

/// The Linux transport over libcurl, against a live server on a socket
/// and against a raw one that answers by hand: what the sync engine
/// relies on (answers, the moments before them, streams, deadlines,
/// cancellation, what "not sent" means), TLS with a CA of the test's own,
/// compressed answers, and an idle stream that costs no CPU.
@Suite("CurlTransport", .timeLimit(.minutes(3)))
struct CurlTransportTests {
    static func push(_ name: String, client: String = "8f1e0c36-6a3f-4e3b-9a49-2d3c6a0f8e11", seq: Int = 1) -> Data {
        let record = String(format: "0190e3c4-0000-7000-8000-%012d", seq)
        return Data(
            #"{"client_id":"\#(client)","mutations":[{"seq":\#(seq),"id":"0190e3c4-0000-7000-8000-\#(String(format: "%012d", seq + 100))","op":"create","collection":"people","uuid":"\#(record)","data":{"name":"\#(name)"}}]}"#
                .utf8)
    }

    static func authorized(_ token: String, json: Bool = false) -> [String: String] {
        var headers = ["Authorization": "Bearer \(token)"]
        if json { headers["Content-Type"] = "application/json" }
        return headers
    }

    /// The error `body` throws, as a `TransportError`.
    static func failure(_ body: () async throws -> Void) async -> TransportError? {
        do {
            try await body()
            return nil
        } catch {
            return error as? TransportError
        }
    }

    // MARK: Requests and answers

    @Test func aRequestGetsItsAnswerAndAPushIsApplied() async throws {
        let rig = try await LiveSyncRig()
        let transport = CurlTransport(baseURL: rig.base)
        let health = try await transport.send(TransportRequest(method: "GET", target: "/v1/health", timeout: 10))
        #expect(health.status == 200)
        #expect(String(decoding: health.body, as: UTF8.self).contains("server_time"))
        #expect(health.headers["content-type"]?.contains("json") == true, "header names in lowercase: \(health.headers)")

        let token = try rig.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)
        let pushed = try await transport.send(
            TransportRequest(
                method: "POST", target: "/v1/push", headers: Self.authorized(token, json: true), body: Self.push("Ana"), timeout: 10))
        #expect(pushed.status == 200)
        #expect(String(decoding: pushed.body, as: UTF8.self).contains(#""status":"applied""#))
        // The same connection serves the next request (keep-alive); many in turn all answer.
        for _ in 0..<50 {
            #expect(try await transport.send(TransportRequest(method: "GET", target: "/v1/health", timeout: 10)).status == 200)
        }
    }

    /// `.bodySent`, `.head(status)`, then the answer's headers (a pull's next cursor is among them), once each.
    static func told(_ events: [RequestProgress], status: Int) -> Bool {
        guard events.count == 3, events[0] == .bodySent, events[1] == .head(status),
            case .headers(let headers) = events[2]
        else { return false }
        return headers["content-type"] != nil || headers["content-length"] != nil
    }

    @Test func progressTellsTheBodySentThenTheHeadOnceEachInOrder() async throws {
        let rig = try await LiveSyncRig()
        let transport = CurlTransport(baseURL: rig.base)
        let token = try rig.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)
        let body = Data(repeating: UInt8(ascii: "x"), count: 1 << 20)
        for (headers, expected) in [(Self.authorized(token, json: true), 400), (["Content-Type": "application/json"], 401)] {
            let events = Locked<[RequestProgress]>([])
            let response = try await transport.send(
                TransportRequest(method: "POST", target: "/v1/push", headers: headers, body: body, timeout: 30)
            ) { event in events.withLock { $0.append(event) } }
            #expect(response.status == expected)
            #expect(Self.told(events.current, status: expected))
        }
        // A request without a body is told both too.
        let events = Locked<[RequestProgress]>([])
        _ = try await transport.send(TransportRequest(method: "GET", target: "/v1/health", timeout: 10)) { event in
            events.withLock { $0.append(event) }
        }
        #expect(Self.told(events.current, status: 200))
    }

    @Test func theHeadIsToldBeforeASlowBodyArrives() async throws {
        // The body goes only once the client has been told the head (or after 10 s without).
        let headTold = DispatchSemaphore(value: 0)
        let bodyWaitedForTheHead = Locked<Bool?>(nil)
        let server = try RawHTTPServer { connection in
            connection.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\n")
            bodyWaitedForTheHead.withLock { $0 = headTold.wait(timeout: .now() + 10) == .success }
            connection.write("0123456789")
        }
        let transport = CurlTransport(baseURL: server.base)
        let events = Locked<[RequestProgress]>([])
        let response = try await transport.send(TransportRequest(method: "GET", target: "/slow", timeout: 30)) { event in
            events.withLock { $0.append(event) }
            if case .head = event { headTold.signal() }
        }
        #expect(response.body == Data("0123456789".utf8))
        #expect(Self.told(events.current, status: 200))
        #expect(bodyWaitedForTheHead.current == true, "the head was told only with the whole answer")
    }

    @Test func anUploadIsStoredWholeAndToldSentThenAnswered() async throws {
        let rig = try await LiveSyncRig()
        let transport = CurlTransport(baseURL: rig.base)
        let token = try rig.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)
        let photo = Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) })
        let sha = SHA256.hex(of: photo)
        var headers = Self.authorized(token)
        headers["Content-Type"] = "image/jpeg"
        headers["Connection"] = "close"
        let events = Locked<[RequestProgress]>([])
        let put = try await transport.send(
            TransportRequest(method: "PUT", target: "/v1/blobs/\(sha)", headers: headers, body: photo, timeout: 30)
        ) { event in events.withLock { $0.append(event) } }
        #expect(put.status == 200, "\(String(decoding: put.body, as: UTF8.self))")
        #expect(put.headers["upload-offset"] == "\(photo.count)")
        #expect(Self.told(events.current, status: 200))
        let head = try await transport.send(
            TransportRequest(method: "HEAD", target: "/v1/blobs/\(sha)", headers: Self.authorized(token), timeout: 10))
        #expect(head.status == 200)
        #expect(head.headers["content-length"] == "\(photo.count)")
        let back = try await transport.send(
            TransportRequest(method: "GET", target: "/v1/blobs/\(sha)", headers: Self.authorized(token), timeout: 30))
        #expect(back.body == photo)
    }

    /// An upload cut mid-body fails as "no answer" and is not sent again by
    /// the transport on another connection: the engine asks the server
    /// where the upload stands and goes on from there.
    @Test func anUploadCutMidBodyIsNotSentAgainByItself() async throws {
        let rig = try await LiveSyncRig()
        let proxy = try await rig.chaosProxy(.cutAfterClientBytes(1_000_000))
        defer { proxy.stop() }
        let transport = CurlTransport(baseURL: proxy.url)
        let token = try rig.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)
        // No connection kept alive yet: the PUT opens exactly one (whether a
        // piece reuses a kept-alive one depends on timing), and a resend by
        // libcurl would open a second.
        let accepted = proxy.connectionsAccepted

        let photo = Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 11) })
        let sha = SHA256.hex(of: photo)
        var headers = Self.authorized(token)
        headers["Content-Type"] = "image/jpeg"
        let failure = await Self.failure {
            _ = try await transport.send(TransportRequest(method: "PUT", target: "/v1/blobs/\(sha)", headers: headers, body: photo, timeout: 20))
        }
        guard case .noAnswer = failure else { Issue.record("expected no answer, got \(String(describing: failure))"); return }
        // One connection for the PUT, and none after it.
        try await Task.sleep(for: .milliseconds(300))
        #expect(proxy.connectionsAccepted == accepted + 1, "connections: \(proxy.connectionsAccepted - accepted) for one PUT")
        let held = try await CurlTransport(baseURL: rig.base).send(
            TransportRequest(method: "HEAD", target: "/v1/blobs/\(sha)", headers: Self.authorized(token), timeout: 10))
        #expect(held.status == 404)
        #expect((held.headers["upload-offset"].flatMap { Int($0) } ?? 0) <= 1_000_000, "\(held.headers)")
    }

    // MARK: Deadlines, failures and cancellation

    @Test func aSilentServerEndsAtTheTimeoutAsNoAnswer() async throws {
        // Silent for a minute: the 1 s deadline must end each wait long before
        // (the bound allows a loaded run's scheduling, not the server's minute).
        let server = try RawHTTPServer { connection in _ = connection.waitForClose(within: 60) }
        let transport = CurlTransport(baseURL: server.base)
        let started = ContinuousClock.now
        let failure = await Self.failure {
            _ = try await transport.send(TransportRequest(method: "POST", target: "/v1/push", body: Data("{}".utf8), timeout: 1))
        }
        guard case .noAnswer = failure else { Issue.record("expected no answer, got \(String(describing: failure))"); return }
        #expect(ContinuousClock.now - started < .seconds(30), "a 1 s deadline, not the server, ended it")
        // A stream's head has the same deadline.
        let streamStarted = ContinuousClock.now
        let streamFailure = await Self.failure {
            _ = try await transport.openStream(TransportRequest(method: "GET", target: "/v1/stream", timeout: 1))
        }
        guard case .noAnswer = streamFailure else { Issue.record("expected no answer, got \(String(describing: streamFailure))"); return }
        let waited = ContinuousClock.now - streamStarted
        #expect(waited >= .milliseconds(900) && waited < .seconds(30), "the head wait ended after \(waited)")
    }

    @Test func aRefusedPortIsNotSentAndABadAddressToo() async throws {
        let port = try RawHTTPServer.refusedPort()
        let transport = CurlTransport(baseURL: URL(string: "http://127.0.0.1:\(port)")!)
        let failure = await Self.failure { _ = try await transport.send(TransportRequest(method: "POST", target: "/v1/push", timeout: 5)) }
        guard case .notSent(let message) = failure else { Issue.record("expected not sent, got \(String(describing: failure))"); return }
        #expect(message.contains("could not connect"), "\(message)")
        let streamFailure = await Self.failure { _ = try await transport.openStream(TransportRequest(method: "GET", target: "/v1/stream", timeout: 5)) }
        guard case .notSent = streamFailure else { Issue.record("expected not sent, got \(String(describing: streamFailure))"); return }
        let unknown = CurlTransport(baseURL: URL(string: "http://no-such-host.invalid")!)
        let lookup = await Self.failure { _ = try await unknown.send(TransportRequest(method: "GET", target: "/v1/health", timeout: 10)) }
        guard case .notSent = lookup else { Issue.record("expected not sent, got \(String(describing: lookup))"); return }
    }

    @Test func cancellingTheTaskEndsARequestUnderWay() async throws {
        // Silent for a minute: the 1 s deadline must end each wait long before
        // (the bound allows a loaded run's scheduling, not the server's minute).
        let server = try RawHTTPServer { connection in _ = connection.waitForClose(within: 60) }
        let transport = CurlTransport(baseURL: server.base)
        let request = Task { try await transport.send(TransportRequest(method: "GET", target: "/held", timeout: 30)) }
        try await Task.sleep(for: .milliseconds(300))
        let cancelled = ContinuousClock.now
        request.cancel()
        let outcome = try await awaitBounded("the cancelled request ended", within: .seconds(5)) { await request.result }
        #expect(ContinuousClock.now - cancelled < .seconds(10), "ended by the cancellation, not the 30 s timeout")
        #expect(throws: TransportError.cancelled) { try outcome.get() }
        // Cancelled before it starts: it never goes out.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await transport.send(TransportRequest(method: "GET", target: "/held", timeout: 30))
        }
        let earlyOutcome = try await awaitBounded("the request cancelled at its start ended", within: .seconds(5)) { await early.result }
        #expect(throws: TransportError.cancelled) { try earlyOutcome.get() }
    }

    @Test func manyRequestsCancelledAroundTheirAnswersAllEnd() async throws {
        let rig = try await LiveSyncRig()
        let transport = CurlTransport(baseURL: rig.base)
        let outcomes = Locked((answered: 0, cancelled: 0))
        try await awaitBounded("500 requests, each cancelled around its answer, all ended", within: .seconds(60)) {
            for round in 0..<50 {
                await withTaskGroup(of: Void.self) { group in
                    for index in 0..<10 {
                        let request = Task { try await transport.send(TransportRequest(method: "GET", target: "/v1/health", timeout: 10)) }
                        group.addTask {
                            try? await Task.sleep(for: .microseconds((round * 10 + index) * 37 % 2_000))
                            request.cancel()
                            let ended = await request.result
                            outcomes.withLock { if (try? ended.get()) != nil { $0.answered += 1 } else { $0.cancelled += 1 } }
                        }
                    }
                }
            }
        }
        #expect(outcomes.current.answered + outcomes.current.cancelled == 500)
        // The transport still answers after all that.
        #expect(try await transport.send(TransportRequest(method: "GET", target: "/v1/health", timeout: 10)).status == 200)
    }

    // MARK: Streams

    @Test func aStreamCarriesEventsAsTheyComeAndEndingItsIterationClosesIt() async throws {
        let rig = try await LiveSyncRig(heartbeatSeconds: 1)
        let transport = CurlTransport(baseURL: rig.base)
        let token = try rig.server.tokens.issue(user: "c-1", role: .coordinator, team: "t-1", ttl: nil)
        let stream = try await transport.openStream(
            TransportRequest(
                method: "GET", target: "/v1/stream?collections=people", headers: Self.authorized(token), timeout: 10))
        #expect(stream.status == 200)
        #expect(stream.headers["content-type"]?.hasPrefix("text/event-stream") == true)
        let received = Locked(Data())
        let reader = Task {
            for try await chunk in stream.bytes {
                received.withLock { $0.append(chunk) }
                if String(decoding: received.current, as: UTF8.self).contains("From the field") { return }
            }
        }
        try await eventually("the first heartbeat arrived", timeout: .seconds(20)) {
            String(decoding: received.current, as: UTF8.self).contains("event: heartbeat")
        }
        let writer = try rig.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)
        let pushed = try await transport.send(
            TransportRequest(
                method: "POST", target: "/v1/push", headers: Self.authorized(writer, json: true), body: Self.push("From the field"),
                timeout: 10))
        #expect(pushed.status == 200)
        // The reader ends its iteration at the change: the stream closes.
        try await awaitBounded("the change reached the stream", within: .seconds(20)) { try await reader.value }
        #expect(String(decoding: received.current, as: UTF8.self).contains("event: changes"))
    }

    /// A stream never takes a kept-alive connection (one a server or a
    /// proxy may be closing as idle): it opens its own.
    @Test func aStreamOpensAConnectionOfItsOwn() async throws {
        let rig = try await LiveSyncRig()
        let proxy = try await rig.chaosProxy()
        defer { proxy.stop() }
        let transport = CurlTransport(baseURL: proxy.url)
        let token = try rig.server.tokens.issue(user: "c-1", role: .coordinator, team: "t-1", ttl: nil)
        let before = proxy.connectionsAccepted  // the rig's own check that the proxy serves
        #expect(try await transport.send(TransportRequest(method: "GET", target: "/v1/health", timeout: 10)).status == 200)
        #expect(proxy.connectionsAccepted == before + 1)
        let stream = try await transport.openStream(
            TransportRequest(method: "GET", target: "/v1/stream?collections=people", headers: Self.authorized(token), timeout: 10))
        #expect(stream.status == 200)
        #expect(proxy.connectionsAccepted == before + 2, "the stream went on the kept-alive connection")
        // Requests beside the open stream reuse the kept-alive one.
        #expect(try await transport.send(TransportRequest(method: "GET", target: "/v1/health", timeout: 10)).status == 200)
        #expect(proxy.connectionsAccepted == before + 2)
    }

    @Test func endingOrCancellingAStreamClosesItsConnection() async throws {
        let closed = Locked(0)
        let server = try RawHTTPServer { connection in
            connection.write("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            let event = "event: heartbeat\ndata: {}\n\n"
            connection.write(String(event.utf8.count, radix: 16) + "\r\n" + event + "\r\n")
            if connection.waitForClose(within: 20) { closed.withLock { $0 += 1 } }
        }
        let transport = CurlTransport(baseURL: server.base)
        // Ended by the reader after its first piece (and let go, as the engine does when its channel ends).
        func readOnePiece() async throws {
            let first = try await transport.openStream(TransportRequest(method: "GET", target: "/v1/stream", timeout: 10))
            for try await _ in first.bytes { break }
        }
        try await readOnePiece()
        try await eventually("the server saw the ended stream's connection close", timeout: .seconds(30)) { closed.current == 1 }

        // Cancelled with the task reading it.
        let second = try await transport.openStream(TransportRequest(method: "GET", target: "/v1/stream", timeout: 10))
        let pieces = Locked(0)
        let reader = Task {
            for try await _ in second.bytes { pieces.withLock { $0 += 1 } }
        }
        try await eventually("the second stream's first piece arrived", timeout: .seconds(30)) { pieces.current > 0 }
        reader.cancel()
        _ = try await awaitBounded("the cancelled reader ended", within: .seconds(5)) { await reader.result }
        try await eventually("the server saw the cancelled stream's connection close", timeout: .seconds(30)) { closed.current == 2 }

        // Cancelled while waiting for its head.
        let silent = try RawHTTPServer { connection in _ = connection.waitForClose(within: 20) }
        let opening = Task { try await CurlTransport(baseURL: silent.base).openStream(TransportRequest(method: "GET", target: "/", timeout: 30)) }
        try await Task.sleep(for: .milliseconds(300))
        opening.cancel()
        let outcome = try await awaitBounded("the stream cancelled before its head ended", within: .seconds(5)) { await opening.result }
        #expect(throws: TransportError.cancelled) { _ = try outcome.get() }
    }

    // MARK: Compression

    @Test func aGzipAnswerIsHandedOverInflated() async throws {
        let text = Data(String(repeating: #"{"name":"Ana","visits":[1,2,3]},"#, count: 200).utf8)
        let gzipped = try #require(GzipFrames.gzip(text))
        let offered = Locked("")
        let server = try RawHTTPServer { connection in
            offered.withLock { $0 = connection.head }
            connection.write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: \(gzipped.count)\r\n\r\n")
            connection.write(gzipped)
        }
        let response = try await CurlTransport(baseURL: server.base).send(TransportRequest(method: "GET", target: "/v1/pull", timeout: 10))
        #expect(response.body == text)
        #expect(gzipped.count < text.count / 4)
        #expect(offered.current.lowercased().contains("accept-encoding: gzip, deflate"), "\(offered.current)")
    }

    @Test func aGzipStreamDeliversEachEventAsItsBytesArrive() async throws {
        let secondMaySend = DispatchSemaphore(value: 0)
        let server = try RawHTTPServer { connection in
            connection.write("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n")
            func chunk(_ bytes: Data) { connection.write(Data((String(bytes.count, radix: 16) + "\r\n").utf8) + bytes + Data("\r\n".utf8)) }
            chunk(GzipFrames.header + GzipFrames.storedBlock(Data("event: heartbeat\ndata: {\"n\":1}\n\n".utf8)))
            // The second event goes only once the client has read the first.
            guard secondMaySend.wait(timeout: .now() + 20) == .success else { return }
            chunk(GzipFrames.storedBlock(Data("event: heartbeat\ndata: {\"n\":2}\n\n".utf8)))
            _ = connection.waitForClose(within: 20)
        }
        let stream = try await CurlTransport(baseURL: server.base).openStream(TransportRequest(method: "GET", target: "/v1/stream", timeout: 10))
        let text = try await awaitBounded("both events arrived, the second sent after the first was read", within: .seconds(20)) {
            var text = ""
            for try await piece in stream.bytes {
                text += String(decoding: piece, as: UTF8.self)
                if text.contains("\"n\":1") { secondMaySend.signal() }
                if text.contains("\"n\":2") { break }
            }
            return text
        }
        #expect(text == "event: heartbeat\ndata: {\"n\":1}\n\nevent: heartbeat\ndata: {\"n\":2}\n\n")
    }

    // MARK: TLS

    @Test func tlsWithTheTrustedCAFileAnswersAndWithoutItSaysTheCertificateIsNotTrusted() async throws {
        let directory = try TemporaryDirectory()
        let certificate = directory.path("server.crt")
        let key = directory.path("server.key")
        let made = try await runBlocking {
            try ChildProcess.run(
                URL(fileURLWithPath: "/usr/bin/openssl"),
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out",
                    certificate, "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                ])
        }
        try #require(made.status == 0, "\(made.stderr)")
        let server = try SyncServer(database: try SQLiteServerDatabase(path: directory.path("server.sqlite")), config: try ServerConfig())
        let http = try HTTPServer(port: 0, tls: HTTPServer.TLSFiles(certificate: certificate, key: key), server: server)
        defer { http.stop() }
        let base = URL(string: "https://127.0.0.1:\(http.port)")!

        let trusted = try HTTPTransport.make(baseURL: base, trustedCertificates: certificate)
        #expect(trusted is CurlTransport)
        let health = try await trusted.send(TransportRequest(method: "GET", target: "/v1/health", timeout: 10))
        #expect(health.status == 200)

        let failure = await Self.failure {
            _ = try await CurlTransport(baseURL: base).send(TransportRequest(method: "GET", target: "/v1/health", timeout: 10))
        }
        guard case .notSent(let message) = failure else { Issue.record("expected not sent, got \(String(describing: failure))"); return }
        #expect(message.contains("certificate is not trusted"), "\(message)")

        #expect(throws: HTTPTransportError.self) {
            _ = try HTTPTransport.make(baseURL: base, trustedCertificates: directory.path("missing.pem"))
        }
    }

    // MARK: The sync engine on it

    @Test func devicesSyncAndAChangeArrivesLiveThroughCurl() async throws {
        let rig = try await LiveSyncRig(heartbeatSeconds: 1)
        func device(_ user: String, _ role: Role) throws -> (LocalStore, SyncEngine) {
            let store = try LocalStore(path: rig.directory.path("\(user).sqlite"), collections: [Person.descriptor, Visit.descriptor])
            var options = SyncOptions.quickLive
            options.periodicInterval = nil
            let engine = SyncEngine(
                store: store, transport: CurlTransport(baseURL: rig.base),
                token: try rig.server.tokens.issue(user: user, role: role, team: "t-1", ttl: nil), options: options)
            return (store, engine)
        }
        let coordinator = try device("c-1", .coordinator)
        let worker = try device("u-1", .field)
        await coordinator.1.start()
        try await eventually("the coordinator's channel is live", timeout: LiveSyncTests.firstLive) {
            await coordinator.1.currentStatus.live == .live
        }
        for index in 0..<30 { _ = try await worker.0.create(Person(name: "Visitor \(index)")) }
        let id = try await worker.0.create(Person(name: "Captured at the door"))
        try await worker.1.sync()
        try await eventually("the capture is on the coordinator's device") { try await coordinator.0.get(Person.self, id) != nil }
        #expect(try await coordinator.0.query(Person.self).count == 31)
        await coordinator.1.stop()
        #expect(await coordinator.1.runningTasks == 0)
    }

    // MARK: The idle cost

    /// The reason for this transport: URLSession on Linux kept most of a
    /// core busy for as long as a stream was open. The loop's thread is
    /// measured (the process's other threads belong to other tests running
    /// beside this one); the process's share is printed.
    @Test func anIdleOpenStreamCostsNoCPU() async throws {
        let rig = try await LiveSyncRig(heartbeatSeconds: 15)
        let transport = CurlTransport(baseURL: rig.base)
        let token = try rig.server.tokens.issue(user: "c-1", role: .coordinator, team: "t-1", ttl: nil)
        let stream = try await transport.openStream(
            TransportRequest(method: "GET", target: "/v1/stream?collections=people", headers: Self.authorized(token), timeout: 10))
        #expect(stream.status == 200)
        let reader = Task { for try await _ in stream.bytes {} }
        defer { reader.cancel() }
        try await Task.sleep(for: .milliseconds(300))
        let loopBefore = transport.loopCPUTime
        let processBefore = Self.processCPU()
        let wallBefore = ContinuousClock.now
        try await Task.sleep(for: .seconds(3))
        let wall = ContinuousClock.now - wallBefore
        let loopShare = (transport.loopCPUTime - loopBefore) / wall
        let processShare = (Self.processCPU() - processBefore) / wall
        print("CurlTransport idle stream: loop thread \(loopShare * 100)% of a core, whole test process \(processShare * 100)%")
        #expect(loopShare < 0.01, "the loop's thread used \(loopShare * 100)% of a core over \(wall) with an idle stream")
        #expect(!reader.isCancelled)
    }

    static func processCPU() -> Duration {
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        return .seconds(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + .microseconds(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
    }
}
#endif
