import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// Push bodies sent deflated (`Content-Encoding: deflate`, or gzip) over the
/// real socket: taken as the plain body would be; a broken stream, a body
/// that inflates past the size limit and an unknown coding are refused
/// whole, with a clear error, and change nothing.
@Suite("Compressed request bodies", .timeLimit(.minutes(3)))
struct RequestEncodingTests {
    static func people(_ live: LiveServer, _ token: String) async throws -> Int {
        try await live.pullAll(token: token, query: "&collections=people").changes.count
    }

    static func pushBody(_ device: TestDevice, count: Int) throws -> Data {
        let mutations = (0..<count).map { index in
            device.mutation(.create, data: ["name": .string("Person \(index) — visitó \"Zoë\""), "section": .int(Int64(index))])
        }
        return Data(PushRequest(clientID: device.clientID, mutations: mutations).wireBytes())
    }

    /// `data` through the `gzip` program (another writer than ours).
    static func gzipped(_ data: Data) throws -> Data {
        let directory = try TemporaryDirectory()
        let path = directory.path("body")
        try data.write(to: URL(fileURLWithPath: path))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/gzip")
        process.arguments = ["-k", path]
        try process.run()
        process.waitUntilExit()
        return try Data(contentsOf: URL(fileURLWithPath: path + ".gz"))
    }

    @Test func aDeflatedOrGzippedPushIsTakenAsThePlainOneWouldBe() async throws {
        let live = try LiveServer(.sqlite)
        let token = try live.token("f-1")
        let device = TestDevice()

        let plain = try Self.pushBody(device, count: 300)
        let deflated = try #require(BodyCompression.deflate(plain))
        #expect(deflated.count * 3 < plain.count, "\(deflated.count) of \(plain.count) bytes")
        let answer = try await live.send("POST", "/v1/push", token: token, body: deflated, headers: ["Content-Encoding": "deflate"])
        #expect(answer.status == 200, "\(answer.text)")
        let results = try answer.decode(PushResponse.self).results
        #expect(results.count == 300 && results.allSatisfy { $0.status == .applied })
        #expect(answer.headers["accept-encoding"]?.contains("deflate") == true, "the answer says what the server reads")

        let gzip = try await live.send(
            "POST", "/v1/push", token: token, body: try Self.gzipped(try Self.pushBody(device, count: 20)),
            headers: ["Content-Encoding": "gzip"])
        #expect(gzip.status == 200, "\(gzip.text)")
        #expect(try await Self.people(live, token) == 320)
    }

    @Test func brokenOversizedAndUnknownEncodingsAreRefusedWholeAndChangeNothing() async throws {
        let live = try LiveServer(.sqlite)
        let token = try live.token("f-1")
        let device = TestDevice()
        let deflated = try #require(BodyCompression.deflate(try Self.pushBody(device, count: 50)))

        // Cut short, then with bytes after its end.
        for broken in [deflated.prefix(deflated.count / 2), deflated + Data("tail".utf8), Data("not deflate".utf8)] {
            let answer = try await live.send("POST", "/v1/push", token: token, body: broken, headers: ["Content-Encoding": "deflate"])
            #expect(answer.status == 400 && answer.error?.code == .invalidRequest, "\(answer.status) \(answer.text)")
        }
        // A few kilobytes that inflate past the 4 MiB limit: refused before they fill memory.
        let bomb = try #require(BodyCompression.deflate(Data(repeating: UInt8(ascii: " "), count: 6 * 1_048_576)))
        #expect(bomb.count < 64 * 1024)
        let tooLarge = try await live.send("POST", "/v1/push", token: token, body: bomb, headers: ["Content-Encoding": "deflate"])
        #expect(tooLarge.status == 413 && tooLarge.error?.code == .payloadTooLarge, "\(tooLarge.text)")
        // A coding this server does not read: 415, and the codings it does.
        let unknown = try await live.send("POST", "/v1/push", token: token, body: deflated, headers: ["Content-Encoding": "br"])
        #expect(unknown.status == 415 && unknown.error?.code == .unsupportedEncoding, "\(unknown.text)")
        #expect(unknown.headers["accept-encoding"] == "deflate, gzip")

        #expect(try await Self.people(live, token) == 0, "nothing was applied")
        // The same body plain still goes through: nothing about the device was spoiled.
        let plain = try await live.send("POST", "/v1/push", token: token, body: try Self.pushBody(device, count: 5))
        #expect(plain.status == 200, "\(plain.text)")
        #expect(try await Self.people(live, token) == 5)
    }
}
