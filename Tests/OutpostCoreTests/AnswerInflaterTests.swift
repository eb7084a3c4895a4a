#if os(Linux)
import Foundation
import OutpostCore
import Testing

/// Whole answers inflated in one call: both codings HTTP offers (and bare
/// deflate blocks), bodies that do not decode, and bodies that would
/// inflate past the bound (a zip bomb) refused before the memory is taken.
@Suite("Whole answers inflated", .timeLimit(.minutes(2)))
struct AnswerInflaterTests {
    static let page = Data(String(repeating: #"{"collection":"people","uuid":"0190e3c4-0000-7000-8000-000000000001","data":{"name":"Ana"}},"#, count: 2_000).utf8)

    static func compressed(_ body: Data, _ format: DeflateFormat?) throws -> Data {
        let stream = try #require(format.map { DeflateStream(format: $0, level: 6) } ?? DeflateStream(rawBlocksAt: 6))
        return Data(body.withUnsafeBytes { stream.compress($0) })
    }

    @Test func gzipDeflateAndBareBlocksInflateToTheBody() throws {
        let gzip = try Self.compressed(Self.page, .gzip)
        #expect(try AnswerInflater.decode(gzip, codings: "gzip", limit: 1 << 20) == Self.page)
        #expect(try AnswerInflater.decode(gzip, codings: "x-gzip", limit: 1 << 20) == Self.page)
        let zlib = try Self.compressed(Self.page, .deflate)
        #expect(try AnswerInflater.decode(zlib, codings: "Deflate", limit: 1 << 20) == Self.page)
        // Some servers send `deflate` as bare blocks with no zlib wrapper.
        let bare = try Self.compressed(Self.page, nil)
        #expect(try AnswerInflater.decode(bare, codings: "deflate", limit: 1 << 20) == Self.page)
        // Codings listed in the order applied: undone last first.
        let twice = try Self.compressed(zlib, .gzip)
        #expect(try AnswerInflater.decode(twice, codings: "deflate, gzip", limit: 1 << 20) == Self.page)
        #expect(try AnswerInflater.decode(Self.page, codings: "identity", limit: 16) == Self.page)
        #expect(try AnswerInflater.decode(Data(), codings: "gzip", limit: 16) == Data())
        // A deflate body many times its compressed size grows to fit.
        let zeros = Data(count: 3 << 20)
        #expect(try AnswerInflater.decode(try Self.compressed(zeros, .deflate), codings: "deflate", limit: 4 << 20) == zeros)
    }

    @Test func aBodyThatDoesNotDecodeIsBroken() throws {
        let gzip = try Self.compressed(Self.page, .gzip)
        var flipped = gzip
        flipped[gzip.count / 2] ^= 0xFF
        var badCRC = gzip
        badCRC[gzip.count - 6] ^= 0x01
        let zlib = try Self.compressed(Self.page, .deflate)
        let cases: [(String, Data, String)] = [
            ("gzip with a byte changed", flipped, "gzip"),
            ("gzip whose CRC does not match", badCRC, "gzip"),
            ("gzip whose size in the trailer is more than it holds", gzip.prefix(gzip.count - 4) + Data([0, 0, 0x10, 0]), "gzip"),
            ("plain text said to be gzip", Self.page, "gzip"),
            ("a few bytes said to be gzip", Data([0x1f, 0x8b, 0x08]), "gzip"),
            ("deflate cut short", zlib.prefix(zlib.count / 2), "deflate"),
            ("plain text said to be deflate", Self.page, "deflate"),
            ("a coding never offered", gzip, "br"),
        ]
        for (what, body, codings) in cases {
            #expect(throws: BodyCompression.Failure.broken, "\(what)") { _ = try AnswerInflater.decode(body, codings: codings, limit: 1 << 20) }
        }
        // Cut short, or with other bytes after it, the trailer's size is
        // whatever bytes end the body: refused, as broken or as too large.
        for body in [gzip.prefix(gzip.count - 20), gzip + Data("tail".utf8), gzip + Data([16, 0, 0, 0])] {
            #expect(throws: BodyCompression.Failure.self) { _ = try AnswerInflater.decode(body, codings: "gzip", limit: 1 << 20) }
        }
    }

    @Test func aBodyInflatingPastTheBoundIsRefused() throws {
        // 64 MB of zeros is about 64 kB of gzip: refused at a 1 MB bound.
        let bomb = Data(count: 64 << 20)
        let gzip = try Self.compressed(bomb, .gzip)
        #expect(gzip.count < 100_000)
        #expect(throws: BodyCompression.Failure.tooLarge) { _ = try AnswerInflater.decode(gzip, codings: "gzip", limit: 1 << 20) }
        let zlib = try Self.compressed(bomb, .deflate)
        #expect(throws: BodyCompression.Failure.tooLarge) { _ = try AnswerInflater.decode(zlib, codings: "deflate", limit: 1 << 20) }
        // A trailer that understates the size (or a body past 4 GiB, whose
        // size wraps) does not make the buffer too small to be noticed.
        var lying = try Self.compressed(Self.page, .gzip)
        lying.replaceSubrange((lying.count - 4)..<lying.count, with: [16, 0, 0, 0])
        #expect(throws: BodyCompression.Failure.self) { _ = try AnswerInflater.decode(lying, codings: "gzip", limit: 1 << 20) }
        // Exactly at the bound is still read.
        #expect(try AnswerInflater.decode(try Self.compressed(Self.page, .gzip), codings: "gzip", limit: Self.page.count) == Self.page)
    }
}
#endif
