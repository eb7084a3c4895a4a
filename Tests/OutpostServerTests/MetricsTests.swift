import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// `GET /metrics` on a real socket: closed to everyone but admins, the
/// metrics token, or anyone when made public; what it counts matches what
/// happened; and Prometheus' own checker accepts the text.
@Suite("Metrics", .timeLimit(.minutes(3)))
struct MetricsTests {
    /// The value of one sample line, `name{labels} value`.
    static func value(_ text: String, _ series: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1))
        }
        return nil
    }

    @Test(arguments: Backend.available)
    func metricsCountWhatHappenedAndPassPromtool(_ backend: Backend) async throws {
        var config = try ServerConfig()
        config.metricsToken = "scraper-secret-0123456789"
        let live = try LiveServer(backend, config: config)
        let field = try live.token("f-1")
        let admin = try live.token("admin-1", .admin)
        let device = TestDevice()
        let good = device.mutation(.create, data: ["name": "Ana"])
        let bad = device.mutation(.create, data: ["name": .int(5)])
        _ = try await live.push(device.request(good, bad), token: field)
        _ = try await live.pullAll(token: field)
        _ = try await live.get("/v1/no-such-thing", token: field)
        let stream = try await EventReader(live, "/v1/stream?collections=people", token: field)
        try await stream.wait("the stream is open") { !$0.isEmpty }

        // A blob: stored, then one refused.
        let photo = Array("a photo".utf8)
        let sha = BlobTests.sha256(photo)
        #expect(try await live.send("PUT", "/v1/blobs/\(sha)", token: field, body: Data(photo), contentType: "image/jpeg").status == 200)
        #expect(try await live.send("PUT", "/v1/blobs/\(String(repeating: "0", count: 64))", token: field, body: Data(photo)).status == 422)

        let anonymous = try await live.get("/metrics", token: nil)
        #expect(anonymous.status == 401)
        let fieldAnswer = try await live.get("/metrics", token: field)
        #expect(fieldAnswer.status == 403)
        #expect(fieldAnswer.error?.code == .forbidden)
        #expect(try await live.get("/metrics", token: "scraper-secret-0123456789").status == 200)
        #expect(try await live.get("/metrics", token: "scraper-secret-012345678X").status == 401)

        let answer = try await live.get("/metrics", token: admin)
        #expect(answer.status == 200)
        #expect(answer.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
        let text = answer.text
        #expect(Self.value(text, #"outpost_mutations_total{status="applied"}"#) == 1)
        #expect(Self.value(text, #"outpost_mutations_total{status="rejected"}"#) == 1)
        #expect(Self.value(text, #"outpost_http_requests_total{route="/v1/push",status="200"}"#) == 1)
        #expect(Self.value(text, #"outpost_http_requests_total{route="other",status="404"}"#) == 1)
        #expect(Self.value(text, #"outpost_http_requests_total{route="/metrics",status="403"}"#) == 1)
        #expect(Self.value(text, #"outpost_http_request_duration_seconds_count{route="/v1/push"}"#) == 1)
        #expect(Self.value(text, #"outpost_http_request_duration_seconds_bucket{route="/v1/push",le="+Inf"}"#) == 1)
        #expect(Self.value(text, #"outpost_live_connections{kind="stream"}"#) == 1)
        #expect((Self.value(text, "outpost_pull_records_total") ?? 0) >= 1)
        #expect((Self.value(text, #"outpost_db_transaction_duration_seconds_count{kind="write"}"#) ?? 0) >= 1)
        #expect((Self.value(text, "outpost_process_resident_memory_bytes") ?? 0) > 1_000_000)
        #expect(Self.value(text, #"outpost_blob_uploads_total{result="complete"}"#) == 1)
        #expect(Self.value(text, #"outpost_blob_uploads_total{result="hash_mismatch"}"#) == 1)
        #expect(Self.value(text, "outpost_blobs_stored") == 1)
        #expect(Self.value(text, "outpost_blob_stored_bytes") == Double(photo.count))
        #expect((Self.value(text, "outpost_blob_received_bytes_total") ?? 0) >= Double(photo.count), "the upload's bytes are counted")
        if backend == .postgres { #expect(Self.value(text, "outpost_db_lock_wait_seconds_total") != nil) }
        // Ids and tokens never become label values.
        #expect(!text.contains(field) && !text.contains(device.clientID.wireText))
        stream.close()

        // Prometheus' own linter reads what a scrape reads.
        let file = live.directory.path("metrics.txt")
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        let check = try await runBlocking {
            try ChildProcess.run(URL(fileURLWithPath: "/bin/sh"), ["-c", "promtool check metrics < '\(file)'"])
        }
        #expect(check.status == 0, "promtool: \(check.stdout) \(check.stderr)")
    }

    @Test func publicMetricsNeedNoTokenAndOnlyGetIsAnswered() async throws {
        var config = try ServerConfig()
        config.metricsPublic = true
        let live = try LiveServer(.sqlite, config: config)
        #expect(try await live.get("/metrics", token: nil).status == 200)
        #expect(try await live.send("POST", "/metrics", body: Data("{}".utf8)).status == 405)
    }

    @Test func routeLabelsNameEndpointsNotPaths() {
        #expect(ServerMetrics.route(method: "GET", path: "/v1/records/people/0190e3c4-0000-7000-8000-000000000001", query: [:])
            == "/v1/records/{collection}/{uuid}")
        #expect(ServerMetrics.route(method: "GET", path: "/v1/pull", query: ["wait": "30"]) == "/v1/pull?wait")
        #expect(ServerMetrics.route(method: "GET", path: "/v1/mutations/abc", query: [:]) == "/v1/mutations/{id}")
        #expect(ServerMetrics.route(method: "GET", path: "/etc/passwd", query: [:]) == "other")
    }
}
