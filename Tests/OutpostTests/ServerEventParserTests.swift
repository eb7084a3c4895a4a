import Foundation
import Outpost
import Testing

/// The live channel's event parser: the same events whatever pieces the
/// bytes arrive in.
@Suite("Server event parser", .timeLimit(.minutes(1)))
struct ServerEventParserTests {
    static let body = Data(
        ": a comment\r\nevent: changes\r\ndata: {\"a\":1,\r\ndata: \"b\":2}\r\n\r\nevent: heartbeat\ndata: {}\n\ndata: plain\n\n".utf8)
    static let expected = [
        ServerEvent(name: "changes", data: Data("{\"a\":1,\n\"b\":2}".utf8)),
        ServerEvent(name: "heartbeat", data: Data("{}".utf8)),
        ServerEvent(name: "message", data: Data("plain".utf8)),
    ]

    @Test func aWholeBodyGivesEveryEvent() {
        var parser = ServerEventParser()
        #expect(parser.feed(Self.body) == Self.expected)
    }

    @Test(arguments: [1, 2, 3, 7, 16])
    func piecesOfAnySizeGiveTheSameEvents(size: Int) {
        var parser = ServerEventParser()
        var events: [ServerEvent] = []
        var start = 0
        while start < Self.body.count {
            let end = min(start + size, Self.body.count)
            events += parser.feed(Self.body.subdata(in: start..<end))
            start = end
        }
        #expect(events == Self.expected)
    }

    @Test func anUnfinishedEventWaitsForItsBlankLine() {
        var parser = ServerEventParser()
        #expect(parser.feed(Data("event: changes\ndata: {}\n".utf8)).isEmpty)
        #expect(parser.feed(Data()).isEmpty)
        #expect(parser.feed(Data("\n".utf8)) == [ServerEvent(name: "changes", data: Data("{}".utf8))])
    }
}
