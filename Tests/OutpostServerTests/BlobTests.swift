import COpenSSL
import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `PUT`, `HEAD` and `GET /v1/blobs/{sha256}` on a real socket, on both
/// backends: whole and resumable uploads, a connection cut mid-body that
/// resumes from what the server kept, every bad upload refused with nothing
/// stored, `Range` reads, and another user's blob not found.
@Suite("Blobs", .timeLimit(.minutes(3)))
struct BlobTests {
    /// `count` random bytes (OpenSSL's generator: a loop in Swift would keep
    /// the cooperative pool busy for seconds in a debug build) and their name.
    static func blob(_ count: Int, seed: UInt8 = 7) -> (bytes: [UInt8], sha: String) {
        var bytes = [UInt8](repeating: seed, count: count)
        _ = bytes.withUnsafeMutableBytes { RAND_bytes($0.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32($0.count)) }
        return (bytes, sha256(bytes))
    }

    static func sha256(_ bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = bytes.withUnsafeBytes { EVP_Digest($0.baseAddress, $0.count, &digest, &length, EVP_sha256(), nil) }
        return SHA256.hex(digest)
    }

    func put(_ live: LiveServer, _ sha: String, _ body: [UInt8], range: String? = nil, token: String) async throws -> LiveServer.Response {
        try await live.send(
            "PUT", "/v1/blobs/\(sha)", token: token, body: Data(body), contentType: "image/jpeg",
            headers: range.map { ["Content-Range": $0] } ?? [:])
    }

    func get(_ live: LiveServer, _ sha: String, method: String = "GET", range: String? = nil, token: String) async throws -> LiveServer.Response {
        try await live.send(method, "/v1/blobs/\(sha)", token: token, contentType: nil, headers: range.map { ["Range": $0] } ?? [:])
    }

    @Test(arguments: Backend.available)
    func aWholeUploadIsHashedStoredAndReadBackWithRanges(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("f-1")
        let photo = Self.blob(700_000)
        let stored = try await put(live, photo.sha, photo.bytes, token: token)
        #expect(stored.status == 200, "\(stored.text)")
        #expect(stored.text.contains(#""complete":true"#))
        let head = try await get(live, photo.sha, method: "HEAD", token: token)
        #expect(head.status == 200)
        #expect(head.headers["content-length"] == "700000")
        let whole = try await get(live, photo.sha, token: token)
        #expect(whole.status == 200)
        #expect(Array(whole.body) == photo.bytes)
        #expect(whole.headers["content-type"] == "image/jpeg")
        let part = try await get(live, photo.sha, range: "bytes=1000-1999", token: token)
        #expect(part.status == 206)
        #expect(part.headers["content-range"] == "bytes 1000-1999/700000")
        #expect(Array(part.body) == Array(photo.bytes[1000..<2000]))
        // A range across the storage's pieces (256 KiB) and the socket's blocks (64 KiB).
        let across = try await get(live, photo.sha, range: "bytes=262000-600000", token: token)
        #expect(across.status == 206 && Array(across.body) == Array(photo.bytes[262000...600000]))
        let tail = try await get(live, photo.sha, range: "bytes=-10", token: token)
        #expect(Array(tail.body) == Array(photo.bytes.suffix(10)))
        #expect(try await get(live, photo.sha, range: "bytes=800000-", token: token).status == 416)
        // Uploading it again is a no-op.
        let again = try await put(live, photo.sha, photo.bytes, token: token)
        #expect(again.status == 200 && again.text.contains(#""complete":true"#))
    }

    @Test(arguments: Backend.available)
    func aResumableUploadGoesOnFromWhereTheServerStandsAndNowhereElse(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("f-1")
        let photo = Self.blob(1_000_000, seed: 3)
        let first = try await put(live, photo.sha, Array(photo.bytes[0..<300_000]), range: "bytes 0-299999/1000000", token: token)
        #expect(first.status == 200)
        #expect(first.headers["upload-offset"] == "300000")
        #expect(first.text.contains(#""complete":false"#))
        let head = try await get(live, photo.sha, method: "HEAD", token: token)
        #expect(head.status == 404)
        #expect(head.headers["upload-offset"] == "300000")
        // Overlapping or leaving a gap: refused, saying where to go on from.
        for range in ["bytes 0-99999/1000000", "bytes 400000-499999/1000000"] {
            let start = Int(range.dropFirst(6).split(separator: "-")[0])!
            let refused = try await put(live, photo.sha, Array(photo.bytes[start..<(start + 100_000)]), range: range, token: token)
            #expect(refused.status == 409, "\(range)")
            #expect(refused.error?.code == .uploadOffsetMismatch)
            #expect(refused.headers["upload-offset"] == "300000")
        }
        let rest = try await put(live, photo.sha, Array(photo.bytes[300_000...]), range: "bytes 300000-999999/1000000", token: token)
        #expect(rest.status == 200 && rest.text.contains(#""complete":true"#), "\(rest.text)")
        #expect(Array(try await get(live, photo.sha, token: token).body) == photo.bytes)
    }

    @Test(arguments: Backend.available)
    func aConnectionCutMidBodyKeepsWhatArrivedAndTheUploadResumes(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let token = try live.token("f-1")
        let photo = Self.blob(1_000_000, seed: 5)
        let head = "PUT /v1/blobs/\(photo.sha) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
            + "Content-Type: image/jpeg\r\nContent-Length: 1000000\r\n\r\n"
        let port = live.http.port
        let bytes = Array(head.utf8) + Array(photo.bytes[0..<600_000])
        try await runBlocking { try Self.sendAndHangUp(port: port, bytes) }
        var offset = 0
        let deadline = ContinuousClock.now + .seconds(30)
        while offset < 512 * 1024 && ContinuousClock.now < deadline {
            let answer = try await get(live, photo.sha, method: "HEAD", token: token)
            offset = Int(answer.headers["upload-offset"] ?? "0") ?? 0
            if offset < 512 * 1024 { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(offset >= 512 * 1024, "the server kept the pieces that arrived before the cut")
        #expect(offset <= 600_000)
        // As a client does: send from where the server stands; when the cut
        // connection's last piece lands meanwhile, the answer says where to go on from.
        var rest = try await put(live, photo.sha, Array(photo.bytes[offset...]), range: "bytes \(offset)-999999/1000000", token: token)
        for _ in 0..<3 where rest.status == 409 {
            offset = Int(rest.headers["upload-offset"] ?? "0") ?? 0
            rest = try await put(live, photo.sha, Array(photo.bytes[offset...]), range: "bytes \(offset)-999999/1000000", token: token)
        }
        #expect(offset <= 600_000)
        #expect(rest.status == 200 && rest.text.contains(#""complete":true"#), "\(rest.text)")
        #expect(Array(try await get(live, photo.sha, token: token).body) == photo.bytes)
    }

    @Test(arguments: Backend.available)
    func badUploadsAreClearRefusalsAndStoreNothing(_ backend: Backend) async throws {
        var config = try ServerConfig()
        config.maxBlobBytes = 200_000
        let live = try LiveServer(backend, config: config)
        let token = try live.token("f-1")
        let photo = Self.blob(100_000, seed: 9)
        let other = Self.blob(100_000, seed: 10)

        // Bytes that do not hash to the name: dropped.
        let wrong = try await put(live, photo.sha, other.bytes, token: token)
        #expect(wrong.status == 422)
        #expect(wrong.error?.code == .hashMismatch)
        let afterWrong = try await get(live, photo.sha, method: "HEAD", token: token)
        #expect(afterWrong.status == 404 && afterWrong.headers["upload-offset"] == nil)

        let cases: [(String, String, [UInt8], String?, Int)] = [
            ("not 64 hex digits", "abc123", photo.bytes, nil, 400),
            ("not hex", String(repeating: "z", count: 64), photo.bytes, nil, 400),
            ("a range past the end", photo.sha, Array(photo.bytes[0..<11]), "bytes 0-10/5", 400),
            ("a range that is not one", photo.sha, Array(photo.bytes[0..<10]), "bytes=0-9", 400),
            ("a body longer than declared", photo.sha, Array(photo.bytes[0..<2000]), "bytes 0-999/100000", 400),
            ("over the limit", Self.blob(250_000, seed: 11).sha, Self.blob(250_000, seed: 11).bytes, nil, 413),
        ]
        for (name, sha, body, range, status) in cases {
            let answer = try await put(live, sha, body, range: range, token: token)
            #expect(answer.status == status, "\(name): \(answer.status) \(answer.text)")
            #expect(answer.error != nil, "\(name): \(answer.text)")
        }
        // Nothing of those was kept.
        let head = try await get(live, photo.sha, method: "HEAD", token: token)
        #expect(head.status == 404 && head.headers["upload-offset"] == nil, "\(head.headers)")
        #expect(try await put(live, photo.sha, photo.bytes, token: token).status == 200)
        #expect(try await get(live, photo.sha, method: "HEAD", token: "not-a-token").status == 401)
    }

    @Test(arguments: Backend.available)
    func anotherUsersBlobIsNotFoundUntilTheyUploadTheSameBytes(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let ana = try live.token("f-1")
        let bea = try live.token("f-2")
        let photo = Self.blob(50_000, seed: 12)
        #expect(try await put(live, photo.sha, photo.bytes, token: ana).status == 200)
        #expect(try await get(live, photo.sha, token: bea).status == 404)
        #expect(try await get(live, photo.sha, method: "HEAD", token: bea).status == 404)
        // Knowing the hash is not enough: a part, or other bytes, do not make Bea an owner.
        #expect(try await put(live, photo.sha, Array(photo.bytes[0..<1000]), range: "bytes 0-999/50000", token: bea).status == 400)
        #expect(try await put(live, photo.sha, Self.blob(50_000, seed: 13).bytes, token: bea).status == 422)
        #expect(try await get(live, photo.sha, token: bea).status == 404)
        // Her own copy of the same bytes: she may read it, nothing is stored twice.
        #expect(try await put(live, photo.sha, photo.bytes, token: bea).status == 200)
        #expect(Array(try await get(live, photo.sha, token: bea).body) == photo.bytes)
        #expect(Array(try await get(live, photo.sha, token: ana).body) == photo.bytes)
    }

    /// A visit's photo: its mutation is refused with `missing_attachment`
    /// until the bytes are on the server, uploaded by the same person; then
    /// whoever can read the visit can read the photo, and nobody else.
    @Test(arguments: Backend.available)
    func aPhotoIsReadByWhoeverCanReadItsRecordAndNeededBeforeTheRecord(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let ana = try live.token("f-1", team: "t-1")
        let coordinator = try live.token("c-1", .coordinator, team: "t-1")
        let stranger = try live.token("f-9", team: "t-9")
        let device = TestDevice()
        let person = device.mutation(.create, data: ["name": "Lucía"])
        #expect(try await live.push(device.request(person), token: ana).results.first?.status == .applied)
        let photo = Self.blob(80_000, seed: 21)
        let value: JSONValue = .object([
            "sha256": .string(photo.sha), "size": .int(80_000), "content_type": "image/jpeg",
        ])
        let visit = device.mutation(
            .create, "visits",
            data: ["person": .string(person.uuid.wireText), "visited_at": "2026-12-01T10:00:00Z", "photo": value])
        let early = try await live.push(device.request(visit), token: ana)
        #expect(early.results.first?.status == .rejected)
        #expect(early.results.first?.code == "missing_attachment")
        #expect(early.results.first?.errors?["photo"] != nil)

        // A malformed value is an ordinary field error.
        let malformed = device.mutation(
            .create, "visits",
            data: ["person": .string(person.uuid.wireText), "visited_at": "2026-12-01T10:00:00Z", "photo": ["sha256": "abc"]])
        #expect(try await live.push(device.request(malformed), token: ana).results.first?.code == "invalid_field")

        // Someone else's upload does not count for Ana.
        #expect(try await put(live, photo.sha, photo.bytes, token: coordinator).status == 200)
        let again = device.mutation(
            .create, "visits",
            data: ["person": .string(person.uuid.wireText), "visited_at": "2026-12-01T10:00:00Z", "photo": value])
        #expect(try await live.push(device.request(again), token: ana).results.first?.code == "missing_attachment")
        #expect(try await put(live, photo.sha, photo.bytes, token: ana).status == 200)
        let accepted = device.mutation(
            .create, "visits",
            data: ["person": .string(person.uuid.wireText), "visited_at": "2026-12-01T10:00:00Z", "photo": value])
        #expect(try await live.push(device.request(accepted), token: ana).results.first?.status == .applied)

        // The team's other field user can read neither the visit nor its photo; a stranger neither.
        let teammate = try live.token("f-2", team: "t-1")
        #expect(try await get(live, photo.sha, token: teammate).status == 404)
        #expect(try await get(live, photo.sha, token: stranger).status == 404)
        // Once the visit is gone, only those who uploaded the bytes can read them.
        let reader = try live.token("c-2", .coordinator, team: "t-1")
        #expect(Array(try await get(live, photo.sha, token: reader).body) == photo.bytes)
        let delete = device.mutation(.delete, "visits", uuid: accepted.uuid)
        #expect(try await live.push(device.request(delete), token: ana).results.first?.status == .applied)
        #expect(try await get(live, photo.sha, token: reader).status == 404)
        #expect(try await get(live, photo.sha, token: ana).status == 200)
    }

    /// Housekeeping removes blobs no live record names once untouched for the
    /// grace period (7 days), and never one still uploading or still named.
    @Test(arguments: Backend.available)
    func housekeepingRemovesOnlyBlobsNoRecordNamesPastTheirGrace(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let ana = try live.token("f-1")
        let device = TestDevice()
        let person = device.mutation(.create, data: ["name": "Lucía"])
        _ = try await live.push(device.request(person), token: ana)
        let orphan = Self.blob(40_000)
        let named = Self.blob(40_000)
        let uploading = Self.blob(600_000)
        #expect(try await put(live, orphan.sha, orphan.bytes, token: ana).status == 200)
        #expect(try await put(live, named.sha, named.bytes, token: ana).status == 200)
        let visit = device.mutation(
            .create, "visits",
            data: [
                "person": .string(person.uuid.wireText), "visited_at": "2026-12-01T10:00:00Z",
                "photo": .object(["sha256": .string(named.sha), "size": .int(40_000), "content_type": "image/jpeg"]),
            ])
        #expect(try await live.push(device.request(visit), token: ana).results.first?.status == .applied)
        #expect(try await put(live, uploading.sha, Array(uploading.bytes[0..<300_000]), range: "bytes 0-299999/600000", token: ana).status == 200)

        live.clock.advance(by: 6 * 86_400)
        // The upload goes on after six days: it is touched again.
        #expect(try await put(live, uploading.sha, Array(uploading.bytes[300_000..<400_000]), range: "bytes 300000-399999/600000", token: ana).status == 200)
        live.clock.advance(by: 2 * 86_400)
        try live.server.runMaintenance()

        let gone = try await get(live, orphan.sha, method: "HEAD", token: ana)
        #expect(gone.status == 404 && gone.headers["upload-offset"] == nil, "the orphan past its grace is removed")
        #expect(try await get(live, named.sha, method: "HEAD", token: ana).status == 200, "a photo a live visit names stays")
        #expect(try await get(live, uploading.sha, method: "HEAD", token: ana).headers["upload-offset"] == "400000", "an upload in progress stays")
    }

    /// Sends `bytes` and closes the socket without reading an answer: a
    /// connection lost mid-upload.
    static func sendAndHangUp(port: UInt16, _ bytes: [UInt8]) throws {
        let fd = try HostileSocket.connected(port: port)
        HostileSocket.sendAll(fd, bytes)
        // Let the server read what was sent before the connection goes.
        usleep(200_000)
        close(fd)
    }
}
