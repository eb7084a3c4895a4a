import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// Answers of 1 KiB or more go gzip- or deflate-encoded as the request's
/// `Accept-Encoding` allows; blobs go as stored; a page built ahead is
/// compressed where it was built.
@Suite("Compressed answers", .timeLimit(.minutes(3)))
struct AnswerCompressionTests {
    @Test func theCodingFollowsTheRequestsWeights() {
        #expect(AnswerCompression.negotiate(nil) == nil)
        #expect(AnswerCompression.negotiate("gzip, deflate") == .gzip)
        #expect(AnswerCompression.negotiate("deflate") == .deflate)
        #expect(AnswerCompression.negotiate("gzip;q=0, deflate") == .deflate)
        #expect(AnswerCompression.negotiate("gzip;q=0.2, deflate;q=0.8") == .deflate)
        #expect(AnswerCompression.negotiate("GZIP ; Q=1") == .gzip)
        #expect(AnswerCompression.negotiate("x-gzip") == .gzip)
        #expect(AnswerCompression.negotiate("identity") == nil)
        #expect(AnswerCompression.negotiate("gzip;q=0, deflate;q=0") == nil)
        #expect(AnswerCompression.negotiate("br, zstd") == nil, "codings this server does not write")
        #expect(AnswerCompression.negotiate("*") == .gzip)
        #expect(AnswerCompression.negotiate("*;q=0") == nil)
        #expect(AnswerCompression.negotiate("*, gzip;q=0") == .deflate)
        #expect(AnswerCompression.negotiate("gzip;q=0.5, identity") == nil, "plain preferred by weight")
        #expect(AnswerCompression.negotiate("gzip;q=abc") == nil, "a weight that is not a number refuses")
        #expect(AnswerCompression.negotiate("gzip;q=2") == nil, "a weight out of range refuses")
    }

    /// A page of 1,000 records as the feed writes them.
    static func recordPage() -> [UInt8] {
        var page = Array(#"{"changes":["#.utf8)
        for index in 0..<1000 {
            if index > 0 { page.append(UInt8(ascii: ",")) }
            let uuid = UUID().uuidString.lowercased()
            page += Array(
                #"{"collection":"people","uuid":"\#(uuid)","version":\#(1000 + index),"updated_at":"2026-03-0\#(index % 9 + 1)T10:\#(10 + index % 50):00.123Z","deleted":false,"data":{"name":"Person \#(index)","email":"person\#(index)@example.org","phone":"+1 555 01\#(index % 100)","city":"\#(["Lisbon", "Porto", "Braga", "Faro"][index % 4])","notes":"Visited on round \#(index % 17); follow-up \#(index % 3 == 0 ? "needed" : "done")","score":\#(index * 37 % 1000)}}"#
                    .utf8)
        }
        page += Array(#"],"cursor":"abc","has_more":true}"#.utf8)
        return page
    }

    /// Whole answers go through libdeflate at a level whose bytes keep
    /// within 1.10x of zlib level 6's.
    @Test func theAnswerLevelStaysWithinATenthOfZlibLevelSix() throws {
        let page = Self.recordPage()
        let six = try #require(DeflateStream(format: .gzip, level: 6))
        let sixSize = page.withUnsafeBytes { six.compress($0).count }
        let chosen = try #require(AnswerCompression.compress(page, as: .gzip))
        #expect(
            Double(chosen.count) <= 1.10 * Double(sixSize),
            "libdeflate level \(AnswerCompression.level): \(chosen.count) bytes, zlib level 6: \(sixSize)")
        // Compressors are reused from the pool: the same body compresses to the same bytes again.
        #expect(AnswerCompression.compress(page, as: .gzip) == chosen)
    }

    /// Streams keep zlib (they flush each event) at a level within 1.15x of level 6's bytes.
    @Test func theStreamLevelStaysWithinAFifteenthOfLevelSix() throws {
        let page = Self.recordPage()
        let chosen = try #require(DeflateStream(format: .gzip, level: AnswerCompression.streamLevel))
        let six = try #require(DeflateStream(format: .gzip, level: 6))
        let chosenSize = page.withUnsafeBytes { chosen.compress($0).count }
        let sixSize = page.withUnsafeBytes { six.compress($0).count }
        #expect(
            Double(chosenSize) <= 1.15 * Double(sixSize),
            "level \(AnswerCompression.streamLevel): \(chosenSize) bytes, level 6: \(sixSize)")
        #expect(page.withUnsafeBytes { chosen.compress($0).count } == chosenSize)
    }

    /// One libdeflate compressor writes either format, each inflating to the
    /// body; empty and incompressible bodies come back whole too.
    @Test func oneCompressorWritesBothFormatsThatInflateToTheBody() throws {
        let deflater = try #require(AnswerDeflater(level: AnswerCompression.level))
        var noise = SystemRandomNumberGenerator()
        let random = (0..<70_000).map { _ in UInt8.random(in: 0...255, using: &noise) }
        for body in [Self.recordPage(), random, [], Array("x".utf8)] {
            for format in DeflateFormat.allCases {
                let packed = try #require(deflater.compress(body, as: format), "\(format) of \(body.count) bytes")
                #expect(format == .gzip ? packed.prefix(2) == [0x1f, 0x8b] : packed.first == 0x78, "\(format)")
                #expect(try BodyCompression.inflate(Data(packed), limit: 1 << 24) == Data(body), "\(format) of \(body.count) bytes")
            }
        }
        // A large body after a small one: the kept output buffer grows to fit.
        let big = Array(repeating: Self.recordPage(), count: 6).flatMap { $0 }
        let packed = try #require(deflater.compress(big, as: .gzip))
        #expect(try BodyCompression.inflate(Data(packed), limit: 1 << 26) == Data(big))
    }

    @Test func aLevelLibdeflateHasNotIsRefused() {
        #expect(AnswerDeflater(level: 0) == nil)
        #expect(AnswerDeflater(level: 13) == nil)
        #expect(AnswerDeflater(level: -1) == nil)
        #expect(AnswerDeflater(level: 1)?.level == 1)
        #expect(AnswerDeflater(level: 12)?.level == 12)
    }

    /// One request by curl, the answer exactly as sent (curl never inflates
    /// without `--compressed`).
    static func raw(_ url: URL, headers: [String: String]) async throws -> (status: Int, headers: [String: String], body: Data) {
        let directory = try TemporaryDirectory(prefix: "outpost-raw")
        let headerFile = directory.path("head")
        let bodyFile = directory.path("body")
        var arguments = ["-s", "--http1.1", "-D", headerFile, "-o", bodyFile, "--max-time", "30"]
        for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
        arguments.append(url.absoluteString)
        let curl = try SpawnedProcess(URL(fileURLWithPath: "/usr/bin/curl"), arguments)
        try await curl.waitUntilExit(within: .seconds(40), "curl's answer")
        let head = try String(contentsOfFile: headerFile, encoding: .utf8)
        var status = 0
        var fields: [String: String] = [:]
        for line in head.split(separator: "\r\n") {
            if line.hasPrefix("HTTP/") {
                status = Int(line.split(separator: " ")[1]) ?? 0
            } else if let colon = line.firstIndex(of: ":") {
                fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return (status, fields, (try? Data(contentsOf: URL(fileURLWithPath: bodyFile))) ?? Data())
    }

    static func seeded(records: Int, buildsAhead: Bool = true) async throws -> (LiveServer, String) {
        var config = try ServerConfig()
        config.buildsPagesAhead = buildsAhead
        let live = try LiveServer(.sqlite, config: config)
        let token = try live.token("f-1")
        let device = TestDevice()
        let creates = (0..<records).map {
            device.mutation(.create, data: ["name": .string("Person number \($0), living in city \($0 % 7)")])
        }
        _ = try await live.push(PushRequest(clientID: device.clientID, mutations: creates), token: token)
        return (live, token)
    }

    @Test func aPageGoesInTheCodingAskedForAndInflatesToThePlainPage() async throws {
        let (live, token) = try await Self.seeded(records: 60, buildsAhead: false)
        let url = URL(string: "/v1/pull?collections=people&limit=50", relativeTo: live.base)!
        let auth = ["Authorization": "Bearer \(token)"]
        let plain = try await Self.raw(url, headers: auth)
        #expect(plain.status == 200 && plain.headers["content-encoding"] == nil)
        #expect(plain.headers["vary"] == "Accept-Encoding", "the answer depends on Accept-Encoding even when plain")
        let plainPage = try WireCoding.decode(PullResponse.self, from: plain.body)
        #expect(plainPage.changes.count == 50)

        for (accept, coding) in [("gzip, deflate", "gzip"), ("gzip;q=0, deflate", "deflate"), ("deflate;q=0.5, gzip", "gzip")] {
            let answer = try await Self.raw(url, headers: auth.merging(["Accept-Encoding": accept]) { $1 })
            #expect(answer.status == 200)
            #expect(answer.headers["content-encoding"] == coding, "\(accept)")
            #expect(answer.headers["vary"] == "Accept-Encoding")
            #expect(answer.body.count * 3 < plain.body.count, "\(answer.body.count) bytes against \(plain.body.count)")
            let inflated = try BodyCompression.inflate(answer.body, limit: 1 << 24)
            let page = try WireCoding.decode(PullResponse.self, from: inflated)
            #expect(page.changes.map(\.uuid) == plainPage.changes.map(\.uuid) && page.cursor == plainPage.cursor)
            // gzip and zlib streams tell themselves apart by their first bytes.
            #expect(coding == "gzip" ? answer.body.prefix(2) == Data([0x1f, 0x8b]) : answer.body.first == 0x78)
        }
        for refusal in ["identity", "gzip;q=0, deflate;q=0", "br"] {
            let answer = try await Self.raw(url, headers: auth.merging(["Accept-Encoding": refusal]) { $1 })
            #expect(answer.headers["content-encoding"] == nil, "\(refusal)")
            #expect(answer.body.count > 1024 && (try? WireCoding.decode(PullResponse.self, from: answer.body)) != nil)
        }
        // Under 1 KiB: plain whatever was offered.
        let small = try await Self.raw(
            URL(string: "/v1/pull?collections=people&limit=1", relativeTo: live.base)!,
            headers: auth.merging(["Accept-Encoding": "gzip"]) { $1 })
        #expect(small.status == 200 && small.body.count < 1024 && small.headers["content-encoding"] == nil)
        #expect((try? WireCoding.decode(PullResponse.self, from: small.body)) != nil)
    }

    @Test func aBlobGoesAsStoredWhateverWasOffered() async throws {
        let (live, token) = try await Self.seeded(records: 1)
        let bytes = Data(String(repeating: "compressible text of a blob ", count: 400).utf8)
        let sha = BlobTests.sha256([UInt8](bytes))
        let put = try await live.send("PUT", "/v1/blobs/\(sha)", token: token, body: bytes, contentType: "text/plain")
        #expect(put.status == 200 || put.status == 201, "\(put.status) \(put.text)")
        let auth = ["Authorization": "Bearer \(token)", "Accept-Encoding": "gzip, deflate"]
        let url = URL(string: "/v1/blobs/\(sha)", relativeTo: live.base)!
        let whole = try await Self.raw(url, headers: auth)
        #expect(whole.status == 200 && whole.headers["content-encoding"] == nil && whole.body == bytes)
        let part = try await Self.raw(url, headers: auth.merging(["Range": "bytes=100-4999"]) { $1 })
        #expect(part.status == 206 && part.headers["content-encoding"] == nil && part.body == bytes[100...4999])
    }

    /// The page after a full one is built ahead on its own thread and
    /// compressed there; the request that takes it gets those bytes. Each
    /// page names the next one's cursor in `Outpost-Next-Cursor`.
    @Test func aPageBuiltAheadIsCompressedWhereItIsBuiltAndNamedAhead() async throws {
        let (live, token) = try await Self.seeded(records: 120)
        let principal = try live.server.tokens.authenticate(token)
        let first = PullService.Request(collections: ["people"], cursor: nil, limit: 50)
        let page = try live.server.pullPage(first, as: principal, encodeAhead: .gzip)
        #expect(page.hasMore && page.encoded == nil, "a page read now is compressed on its way out")
        var second = first
        second.cursor = page.cursor
        let ahead = try live.server.pullPage(second, as: principal, encodeAhead: .gzip)
        let encoded = try #require(ahead.encoded, "the page built ahead came compressed")
        #expect(encoded.format == .gzip)
        #expect(try BodyCompression.inflate(Data(encoded.body), limit: 1 << 24) == Data(ahead.body))

        // Over the socket: headers name the next cursor, bodies inflate to pages that chain.
        let auth = ["Authorization": "Bearer \(token)", "Accept-Encoding": "gzip"]
        var cursor: String?
        var seen = 0
        for _ in 0..<5 {
            var target = "/v1/pull?collections=people&limit=50"
            if let cursor { target += "&cursor=\(cursor)" }
            let answer = try await Self.raw(URL(string: target, relativeTo: live.base)!, headers: auth)
            #expect(answer.headers["content-encoding"] == "gzip")
            let body = try WireCoding.decode(PullResponse.self, from: try BodyCompression.inflate(answer.body, limit: 1 << 24))
            seen += body.changes.count
            #expect(answer.headers["outpost-next-cursor"] == (body.hasMore ? body.cursor.rawValue : nil))
            cursor = body.cursor.rawValue
            if !body.hasMore { break }
        }
        #expect(seen == 120)
    }
}
