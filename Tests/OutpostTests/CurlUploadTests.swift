#if canImport(CCurl)
import Foundation
@testable import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting
import Testing

/// An attachment's pieces through `CurlTransport` go on one kept-alive
/// connection, and the server stores them in order, each byte once.
@Suite("CurlTransport uploads", .timeLimit(.minutes(2)))
struct CurlUploadTests {
    @Test func piecesOfAnUploadShareOneKeptAliveConnection() async throws {
        // A server no other client has opened a connection to.
        let directory = try TemporaryDirectory(prefix: "outpost-curl-upload")
        let server = try SyncServer(database: try SQLiteServerDatabase(path: directory.path("server.sqlite")), config: ServerConfig())
        let http = try HTTPServer(port: 0, threads: 4, server: server)
        defer { http.stop() }
        let transport = CurlTransport(baseURL: URL(string: "http://127.0.0.1:\(http.port)")!)
        let token = try server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)
        let photo = Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 17 &+ $0 >> 11) })
        let sha = SHA256.hex(of: photo)
        let piece = 1 << 20
        for first in stride(from: 0, to: photo.count, by: piece) {
            let last = min(photo.count, first + piece) - 1
            let put = try await transport.send(
                TransportRequest(
                    method: "PUT", target: "/v1/blobs/\(sha)",
                    headers: [
                        "Authorization": "Bearer \(token)", "Content-Type": "image/jpeg",
                        "Content-Range": "bytes \(first)-\(last)/\(photo.count)",
                    ],
                    body: photo[first...last], timeout: 30))
            #expect(put.status == 200, "\(String(decoding: put.body, as: UTF8.self))")
            #expect(put.headers["upload-offset"] == "\(last + 1)")
            #expect(http.openConnections == 1, "the piece from \(first) went on the connection the others used")
        }
        let back = try await transport.send(
            TransportRequest(
                method: "GET", target: "/v1/blobs/\(sha)", headers: ["Authorization": "Bearer \(token)"], timeout: 30))
        #expect(back.body == photo)
        #expect(server.metrics.blobBytesReceivedTotal == UInt64(photo.count), "each byte stored once")
    }
}
#endif
