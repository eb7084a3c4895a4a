import Foundation
import Outpost
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// One commit delivered to many streams: the page's event is made and
/// deflated once and the same bytes go to every stream that sends it, each
/// stream adding only its own cursor, time and trailer; what each client
/// inflates is exactly the event it would have had on its own.
@Suite("Live fan-out", .timeLimit(.minutes(3)))
struct LiveFanOutTests {
    /// A page of `count` changes (people removed from the reader's scope), as the pull service lays it out.
    static func page(_ count: Int, lastVersion: Int64 = 42, hasMore: Bool = false) throws -> PullService.Page {
        var body = PullService.Page.opening
        let start = body.count
        for index in 0..<count {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            body += try WireCoding.encode(PullChange.removed(collection: "people", uuid: UUID()))
        }
        let range = start..<body.count
        let cursor = PullCursorCodec.encode(lastVersion, scopeTag: "reader")
        PullService.Page.close(&body, cursor: cursor, hasMore: hasMore, serverTime: ServerTimestamp(rawValue: "2026-12-06T09:00:00.000Z"))
        return PullService.Page(
            body: body, changesRange: range, cursor: cursor, hasMore: hasMore, changes: count, lastVersion: lastVersion)
    }

    @Test func theEventIsByteForByteTheOneMadeFromThePageForEachReader() throws {
        let page = try Self.page(3, hasMore: true)
        let event = ChangesEvent(page: page, after: nil)
        let time = ServerTimestamp(rawValue: "2026-12-06T09:00:01.250Z")
        for tag in ["aaaaaaaaaaaa", "bbbbbbbbbbbb"] {
            let alone = LiveStream.event(.changes, page.reissued(cursor: nil, scopeTag: tag, serverTime: time).body)
            #expect(event.head + event.tail(scopeTag: tag, serverTime: time) == alone, "scope \(tag)")
            #expect(event.cursor(scopeTag: tag) == PullCursorCodec.encode(42, scopeTag: tag))
        }
        #expect(event.head + event.tail(cursor: page.cursor, serverTime: time) == LiveStream.event(.changes, page.reissued(cursor: nil, scopeTag: "reader", serverTime: time).body))
    }

    /// 100 streams, gzip and zlib alike, each with its own past (heartbeats,
    /// a large piece of its own, none): the event's deflated bytes are made
    /// once, and every stream inflates to its own plain bytes, checksums
    /// and lengths included.
    @Test func anEventSharedByAHundredStreamsInflatesToTheSameJSONOnEach() throws {
        let event = ChangesEvent(page: try Self.page(20), after: nil)
        let first = try #require(event.deflatedHead)
        #expect(first.bytes.count < event.head.count / 2, "deflated: \(first.bytes.count) of \(event.head.count) bytes")
        let time = ServerTimestamp(rawValue: "2026-12-06T09:00:02.000Z")
        for index in 0..<100 {
            let format: DeflateFormat = index % 2 == 0 ? .gzip : .deflate
            var encoding = StreamEncoding(format: format)
            var wire = encoding.header
            var plain: [UInt8] = []
            for beat in 0..<(index % 3) {
                let own = LiveStream.event(.heartbeat, Array(#"{"server_time":"2026-12-06T09:00:0\#(beat).000Z"}"#.utf8))
                encoding.appendOwn(own, to: &wire)
                plain += own
            }
            if index == 7 {
                // Larger than one stored block holds.
                let own = LiveStream.event(.heartbeat, Array(#"{"pad":""#.utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 150_000) + Array(#""}"#.utf8))
                encoding.appendOwn(own, to: &wire)
                plain += own
            }
            let head = try #require(event.deflatedHead)
            head.bytes.withUnsafeBufferPointer { mine in
                first.bytes.withUnsafeBufferPointer { kept in
                    #expect(mine.baseAddress == kept.baseAddress, "stream \(index) got the event's bytes as made, not made again")
                }
            }
            let tail = event.tail(scopeTag: "tag-\(index)", serverTime: time)
            encoding.append(head, to: &wire)
            encoding.appendOwn(tail, to: &wire)
            plain += event.head + tail
            // Whole at the event's end: ended right there, the stream inflates to everything so far.
            var endedHere = encoding
            var cut = wire
            endedHere.finish(to: &cut)
            #expect(Array(try BodyCompression.inflate(Data(cut), limit: 1 << 22)) == plain, "stream \(index) at the event's end")
            // And later pieces follow on.
            let beat = LiveStream.event(.heartbeat, Array(#"{"server_time":"2026-12-06T09:00:09.000Z"}"#.utf8))
            encoding.appendOwn(beat, to: &wire)
            plain += beat
            encoding.finish(to: &wire)
            let inflated = try BodyCompression.inflate(Data(wire), limit: 1 << 22)
            #expect(Array(inflated) == plain, "stream \(index) (\(format))")
            var parser = ServerEventParser()
            let events = parser.feed(inflated).filter { $0.name == "changes" }
            #expect(events.count == 1, "stream \(index)")
            let response = try WireCoding.decode(PullResponse.self, from: try #require(events.first).data)
            #expect(response.changes.count == 20 && response.cursor.rawValue == PullCursorCodec.encode(42, scopeTag: "tag-\(index)"))
        }
    }

    /// A field user's stream deflates its own events with their history:
    /// after the first, a one-record event costs a fraction of its plain
    /// bytes, far below the same event deflated alone.
    @Test func aStreamOfOnesOwnRecordsDeflatesWithItsHistory() throws {
        var encoding = StreamEncoding(format: .gzip, withHistory: true)
        #expect(encoding.keepsHistory)
        var wire = encoding.header
        var plain: [UInt8] = []
        let time = ServerTimestamp(rawValue: "2026-12-06T09:00:03.000Z")
        for round in 0..<10 {
            let event = ChangesEvent(page: try Self.page(1, lastVersion: Int64(100 + round)), after: nil)
            let bytes = event.head + event.tail(scopeTag: "own", serverTime: time)
            let before = wire.count
            encoding.appendOwn(bytes, to: &wire)
            plain += bytes
            let alone = try #require(event.deflatedHead).bytes.count
            if round > 0 {
                #expect(wire.count - before < alone, "round \(round): \(wire.count - before) bytes with history, \(alone) alone")
            }
        }
        encoding.finish(to: &wire)
        #expect(Array(try BodyCompression.inflate(Data(wire), limit: 1 << 22)) == plain)
    }

    /// A page of `count` people as a census round records them, `round` apart from the last.
    static func peoplePage(round: Int, count: Int) throws -> PullService.Page {
        let names = ["Lucía Romero", "Marco Bianchi", "Olga Petrova", "João Costa", "Ana Torres", "Ivan Sokolov"]
        var body = PullService.Page.opening
        let start = body.count
        for index in 0..<count {
            let number = round * count + index
            if index > 0 { body.append(UInt8(ascii: ",")) }
            let record = WireRecord(
                collection: "people", uuid: UUID(), id: Int64(number + 1), version: Int64(1000 + number),
                updatedAt: ServerTimestamp(Date(timeIntervalSince1970: 1_796_547_600 + Double(number) * 1.7)), deleted: false,
                owner: "writer", team: "t-1",
                data: [
                    "name": .string("\(names[number % names.count]) \(number)"), "phone": .string("555-\(1_000_000 + number)"),
                    "address": .string("Calle Mayor \(number % 300 + 1), interior \(number % 12)"),
                    "notes": .string("Captured in the field during the census round \(number % 17); visit again in the morning if nobody answers."),
                    "section": .int(Int64(number % 400)),
                ])
            body += try WireCoding.encode(PullChange.record(record))
        }
        let range = start..<body.count
        let last = Int64(1000 + round * count + count - 1)
        let cursor = PullCursorCodec.encode(last, scopeTag: "reader")
        PullService.Page.close(&body, cursor: cursor, hasMore: false, serverTime: ServerTimestamp(rawValue: "2026-12-06T09:00:00.000Z"))
        return PullService.Page(body: body, changesRange: range, cursor: cursor, hasMore: false, changes: count, lastVersion: last)
    }

    /// What each way of compressing a stream costs in bytes, for events of
    /// 1, 10 and 100 people (50 events each, after a heartbeat): printed for
    /// docs/benchmarks.md. Shared events are deflated alone, so a small one
    /// compresses less than with the stream's history.
    @Test func bytesOnTheWirePerEventEachWay() throws {
        let time = ServerTimestamp(rawValue: "2026-12-06T09:00:04.000Z")
        for count in [1, 10, 100] {
            var shared = StreamEncoding(format: .gzip)
            var history = StreamEncoding(format: .gzip, withHistory: true)
            var sharedWire = shared.header
            var historyWire = history.header
            let beat = LiveStream.event(.heartbeat, Array(#"{"server_time":"2026-12-06T09:00:00.000Z"}"#.utf8))
            shared.appendOwn(beat, to: &sharedWire)
            history.appendOwn(beat, to: &historyWire)
            let (sharedStart, historyStart) = (sharedWire.count, historyWire.count)
            var plain: [UInt8] = []
            for round in 0..<50 {
                let event = ChangesEvent(page: try Self.peoplePage(round: round, count: count), after: nil)
                let tail = event.tail(scopeTag: "0f34e4bdb676", serverTime: time)
                shared.append(try #require(event.deflatedHead), to: &sharedWire)
                shared.appendOwn(tail, to: &sharedWire)
                history.appendOwn(event.head + tail, to: &historyWire)
                plain += event.head + tail
            }
            let perEvent = { (bytes: Int) in Double(bytes) / 50 }
            let (plainBytes, sharedBytes, historyBytes) =
                (perEvent(plain.count), perEvent(sharedWire.count - sharedStart), perEvent(historyWire.count - historyStart))
            print(
                "LiveFanOut[\(count) people an event]: plain \(Int(plainBytes)) B, deflated once and shared \(Int(sharedBytes)) B (\(String(format: "%.2f", plainBytes / sharedBytes))x), "
                    + "with the stream's history \(Int(historyBytes)) B (\(String(format: "%.2f", plainBytes / historyBytes))x)")
            #expect(historyBytes < sharedBytes && sharedBytes < plainBytes)
            for (encoding, wire) in [(shared, sharedWire), (history, historyWire)] {
                var ended = encoding
                var whole = wire
                ended.finish(to: &whole)
                #expect(Array(try BodyCompression.inflate(Data(whole), limit: 1 << 24)) == beat + plain)
            }
        }
    }

    @Test func aCorruptedTrailerIsCaughtByTheInflater() throws {
        let event = ChangesEvent(page: try Self.page(2), after: nil)
        var encoding = StreamEncoding(format: .gzip)
        var wire = encoding.header
        encoding.append(try #require(event.deflatedHead), to: &wire)
        encoding.appendOwn(event.tail(scopeTag: "t", serverTime: ServerTimestamp(rawValue: "x")), to: &wire)
        encoding.finish(to: &wire)
        #expect(throws: Never.self) { try BodyCompression.inflate(Data(wire), limit: 1 << 20) }
        // The checksum is the stream's own: one byte off and the client refuses it.
        wire[wire.count - 8] ^= 0x01
        #expect(throws: BodyCompression.Failure.self) { try BodyCompression.inflate(Data(wire), limit: 1 << 20) }
    }

    /// A commit wakes the connections whose scope it touched; a write to
    /// reference data wakes everyone who follows that collection, whatever
    /// their scope, and no one who does not.
    @Test func aCommitWakesItsScopesAndReferenceDataWakesEveryoneFollowingIt() throws {
        let hub = LiveHub()
        func open(_ user: String, _ role: Role, team: String, _ collections: Set<String>) throws -> LiveConnection {
            try hub.open(
                kind: .stream,
                interest: LiveInterest(
                    principal: Principal(user: user, role: role, team: team), collections: collections, readOnly: ["sites"]),
                token: nil, wait: .zero, changesPending: false)
        }
        let ana = try open("u-1", .field, team: "t-1", ["people", "sites"])
        let bea = try open("u-2", .field, team: "t-1", ["people", "sites"])
        let coordinator = try open("c-1", .coordinator, team: "t-1", ["people"])
        let elsewhere = try open("c-9", .coordinator, team: "t-2", ["people", "sites"])
        let woken = { [ana, bea, coordinator, elsewhere].map { $0.takePending().changes } }
        hub.committed(CommitNotice(collections: ["people"], owners: ["u-1"], teams: ["t-1"]))
        #expect(woken() == [true, false, true, false], "Ana's record: Ana and her team's coordinator")
        hub.committed(CommitNotice(collections: ["sites"], owners: ["a-1"], teams: ["hq"]))
        #expect(woken() == [true, true, false, true], "reference data: everyone following sites, nobody else")
    }

    /// On one commit, field users get their own records only and each
    /// coordinator of the team the same event with a cursor of its own
    /// scope; another team's coordinator gets nothing. Streams compressed,
    /// as the library asks them.
    @Test func usersWithDifferentScopesOnOneCommitGetTheirOwnEvents() async throws {
        let live = try LiveServer(.sqlite, config: try LiveEndpointTests.config())
        let ana = try live.token("u-1")
        let bea = try live.token("u-2")
        let coordinators = try ["c-1", "c-2"].map { try live.token($0, .coordinator) }
        let elsewhere = try live.token("c-9", .coordinator, team: "t-2")
        let anaStream = try await EventReader(live, "/v1/stream?collections=people", token: ana)
        let beaStream = try await EventReader(live, "/v1/stream?collections=people", token: bea)
        var teamStreams: [EventReader] = []
        for token in coordinators { teamStreams.append(try await EventReader(live, "/v1/stream?collections=people", token: token)) }
        let elsewhereStream = try await EventReader(live, "/v1/stream?collections=people", token: elsewhere)
        for stream in [anaStream, beaStream, elsewhereStream] + teamStreams {
            #expect(stream.headers["content-encoding"] == "gzip")
            try await stream.wait("the stream is open") { !$0.isEmpty }
        }
        _ = try await live.push(LiveEndpointTests().person(TestDevice(), "Ana's"), token: ana)
        try await anaStream.wait("Ana's record") { _ in try anaStream.changes().count == 1 }
        var cursors: [String] = []
        for (index, stream) in teamStreams.enumerated() {
            try await stream.wait("coordinator \(index + 1) has it") { _ in try stream.changes().count == 1 }
            let event = try #require(stream.all.last { $0.name == "changes" })
            cursors.append(try WireCoding.decode(PullResponse.self, from: event.data).cursor.rawValue)
        }
        #expect(Set(cursors).count == 2, "each coordinator's cursor names its own scope")
        for (token, cursor) in zip(coordinators, cursors) {
            let next = try await live.get("/v1/pull?cursor=\(cursor)", token: token)
            #expect(next.status == 200, "\(next.text)")
            #expect(try next.decode(PullResponse.self).changes.isEmpty, "nothing after the event's cursor")
        }
        let crossed = try await live.get("/v1/pull?cursor=\(cursors[1])", token: coordinators[0])
        #expect(crossed.status == 410, "another user's cursor is not this one's: \(crossed.status)")
        // A later commit of Bea's reaches her: by then Ana's would have too.
        _ = try await live.push(LiveEndpointTests().person(TestDevice(), "Bea's"), token: bea)
        try await beaStream.wait("Bea's record") { _ in try beaStream.changes().count == 1 }
        #expect(try beaStream.changes().compactMap { $0.record?.data?["name"]?.stringValue } == ["Bea's"])
        #expect(try elsewhereStream.changes().isEmpty, "another team's coordinator gets nothing")
        for stream in [anaStream, beaStream, elsewhereStream] + teamStreams {
            #expect(!stream.all.contains { $0.name == "error" })
        }
    }

    /// A stream that joins after some commits gets its backlog, made for it
    /// alone, then the next commit's event shared with a stream open since
    /// the start; both inflate to the same records in the same order.
    @Test func aStreamJoiningMidwayGetsTheSameChangesAsOneOpenSinceTheStart() async throws {
        let live = try LiveServer(.sqlite, config: try LiveEndpointTests.config())
        let ana = try live.token("u-1")
        let coordinators = try ["c-1", "c-2"].map { try live.token($0, .coordinator) }
        let early = try await EventReader(live, "/v1/stream?collections=people", token: coordinators[0])
        try await early.wait("the early stream is open") { !$0.isEmpty }
        let device = TestDevice()
        for name in ["one", "two"] { _ = try await live.push(LiveEndpointTests().person(device, name), token: ana) }
        try await early.wait("the first two") { _ in try early.changes().count == 2 }
        let (_, cursor) = try await live.pullAll(token: coordinators[1], limit: 1000)
        let firstCursor = try #require(cursor)
        _ = try await live.push(LiveEndpointTests().person(device, "three"), token: ana)
        let late = try await EventReader(live, "/v1/stream?collections=people&cursor=\(firstCursor.rawValue)", token: coordinators[1])
        try await late.wait("the late stream's backlog") { _ in try late.changes().count == 1 }
        for name in ["four", "five"] { _ = try await live.push(LiveEndpointTests().person(device, name), token: ana) }
        try await early.wait("five on the early stream") { _ in try early.changes().count == 5 }
        try await late.wait("three on the late one") { _ in try late.changes().count == 3 }
        let names = { (stream: EventReader) in try stream.changes().compactMap { $0.record?.data?["name"]?.stringValue } }
        #expect(try names(early) == ["one", "two", "three", "four", "five"])
        #expect(try names(late) == ["three", "four", "five"])
        #expect(late.headers["content-encoding"] == "gzip" && !late.all.contains { $0.name == "error" })
    }

    /// A stream that did not ask for compression gets the same events plain.
    @Test func aPlainStreamGetsThePlainEvent() async throws {
        let live = try LiveServer(.sqlite, config: try LiveEndpointTests.config())
        let ana = try live.token("u-1")
        let stream = try RawStream(port: live.http.port, token: ana, acceptEncoding: nil)
        defer { stream.close() }
        let opened = try stream.read(until: "event: heartbeat")
        #expect(!opened.lowercased().contains("content-encoding"), "\(opened)")
        _ = try await live.push(LiveEndpointTests().person(TestDevice(), "Ana's"), token: ana)
        let event = try stream.read(until: "\n\n", after: "event: changes")
        #expect(event.contains(#""name":"Ana's""#), "\(event)")
    }

    /// A stream in the zlib format (`deflate`), ended by the server (a
    /// revoked token): read to its end, its bytes inflate whole, the
    /// trailer's checksum included, to the heartbeat, the change and the error.
    @Test func aDeflateStreamEndedByTheServerInflatesWhole() async throws {
        let live = try LiveServer(.sqlite, config: try LiveEndpointTests.config())
        let ana = try live.token("u-1")
        _ = try await live.push(LiveEndpointTests().person(TestDevice(), "before"), token: ana)
        let stream = try RawStream(port: live.http.port, token: ana, acceptEncoding: "deflate")
        defer { stream.close() }
        _ = try stream.read(until: "\r\n\r\n")
        _ = try await live.push(LiveEndpointTests().person(TestDevice(), "during"), token: ana)
        try await Task.sleep(for: .milliseconds(300))
        try live.server.tokens.revoke(ana)
        let answer = try stream.readToEnd()
        let split = try #require(answer.firstRange(of: Array("\r\n\r\n".utf8)))
        let headers = String(decoding: answer[..<split.lowerBound], as: UTF8.self).lowercased()
        #expect(headers.contains("content-encoding: deflate"), "\(headers)")
        let plain = try BodyCompression.inflate(Data(answer[split.upperBound...]), limit: 1 << 22)
        var parser = ServerEventParser()
        let events = parser.feed(plain)
        #expect(events.first?.name == "heartbeat" && events.last?.name == "error", "\(events.map(\.name))")
        let names = try events.filter { $0.name == "changes" }.flatMap { try WireCoding.decode(PullResponse.self, from: $0.data).changes }
            .compactMap { $0.record?.data?["name"]?.stringValue }
        #expect(names == ["before", "during"])
    }
}

/// A `GET /v1/stream` on a plain socket, HTTP/1.0 so the body comes
/// unchunked and ends when the server closes it.
private final class RawStream {
    private let fd: Int32
    private var received: [UInt8] = []

    init(port: UInt16, token: String, acceptEncoding: String?) throws {
        fd = try RawSocket.connect(port: port, from: "127.0.0.1", timeoutSeconds: 30)
        var request = "GET /v1/stream?collections=people HTTP/1.0\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
        if let acceptEncoding { request += "Accept-Encoding: \(acceptEncoding)\r\n" }
        HostileSocket.sendAll(fd, Array((request + "\r\n").utf8))
    }

    func close() { _ = Glibc.close(fd) }

    /// Everything received until `marker` appears after `after` (bounded by the socket's 30 s timeout).
    func read(until marker: String, after start: String? = nil) throws -> String {
        while true {
            let text = String(decoding: received, as: UTF8.self)
            let from = start.flatMap { text.range(of: $0)?.upperBound } ?? (start == nil ? text.startIndex : nil)
            if let from, text[from...].contains(marker) { return String(text[from...]) }
            guard try receive() else { throw HostileSocket.Failure(description: "the stream ended before \(marker)") }
        }
    }

    /// Everything received until the server closed the connection.
    func readToEnd() throws -> [UInt8] {
        while try receive() {}
        return received
    }

    /// One read; false at the end of the stream.
    private func receive() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                received += chunk[0..<count]
                return true
            }
            if count == 0 { return false }
            if errno == EINTR { continue }
            throw HostileSocket.Failure(description: "reading the stream failed or timed out (errno \(errno))")
        }
    }
}
