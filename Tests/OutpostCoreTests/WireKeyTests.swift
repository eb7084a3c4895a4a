import Foundation
@testable import OutpostCore
import Testing

/// The one definition of the protocol's keys: each is in the contract, each
/// is spelled once, and every byte form is made from that spelling.
@Suite("Wire keys", .timeLimit(.minutes(1)))
struct WireKeyTests {
    static var protocolText: String {
        get throws {
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            return try String(contentsOf: root.appendingPathComponent("docs/protocol.md"), encoding: .utf8)
        }
    }

    /// A key the contract does not name cannot creep in, nor one drift away
    /// from its spelling there: each appears in docs/protocol.md as JSON
    /// (`"key"`) or as code (`` `key` ``).
    @Test(arguments: WireKey.allCases)
    func everyKeyIsInTheProtocol(_ key: WireKey) throws {
        let text = try Self.protocolText
        #expect(text.contains("\"\(key.name)\"") || text.contains("`\(key.name)`"), "\(key) is spelled '\(key.name)'")
    }

    @Test(arguments: LiveEventName.allCases)
    func everyLiveEventIsInTheProtocol(_ event: LiveEventName) throws {
        #expect(try Self.protocolText.contains("event: \(event.rawValue)"))
    }

    @Test func everyKeyIsSpelledOnceAndFoundByItsSpelling() {
        let names = WireKey.allCases.map(\.name)
        #expect(Set(names).count == names.count)
        for key in WireKey.allCases {
            #expect(WireKey(name: key.name) == key)
            #expect(WireKey(stringValue: key.name) == key)
            #expect(key.stringValue == key.name && key.intValue == nil)
            // snake_case, as the protocol writes every key.
            #expect(key.name.allSatisfy { $0.isLowercase || $0.isNumber || $0 == "_" }, "\(key.name)")
        }
        #expect(WireKey(name: "hasMore") == nil && WireKey(stringValue: "nope") == nil && WireKey(intValue: 0) == nil)
    }

    @Test func theByteFormsAreMadeFromTheSpelling() {
        #expect(WireKey.hasMore.utf8 == Array("has_more".utf8))
        #expect(WireKey.serverTime.quoted == Array(#""server_time":"#.utf8))
        #expect(WireKey.changes.opening == Array(#"{"changes":"#.utf8))
        #expect(WireKey.baseVersion.member == Array(#","base_version":"#.utf8))
        #expect(WireKey.deleted.member(true) == Array(#","deleted":true"#.utf8))
        #expect(WireKey.removed.member(false) == Array(#","removed":false"#.utf8))
        for key in WireKey.allCases {
            let quoted = Array("\"\(key.name)\":".utf8)
            #expect(key.utf8 == Array(key.name.utf8))
            #expect(key.quoted == quoted)
            #expect(key.opening == [UInt8(ascii: "{")] + quoted)
            #expect(key.member == [UInt8(ascii: ",")] + quoted)
        }
    }

    /// The scanner tells a change's keys apart by these bytes.
    @Test func theScannerReadsAKeyByItsBytes() throws {
        var scanner = JSONScanner(Array(#""updated_at""#.utf8))
        let keys: [WireKey] = [.uuid, .updatedAt, .deviceTime]
        #expect(try scanner.readKey(keys.map(\.utf8)) == 1)
    }
}
