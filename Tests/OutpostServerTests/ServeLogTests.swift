import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// What `outpost serve` writes on stderr, as a log shipper reads it: one
/// JSON object a line, the release first, and no line for each health
/// check or scrape unless asked.
@Suite("Serve log", .timeLimit(.minutes(2)))
struct ServeLogTests {
    @Test func everyLineIsJSONTheFirstSaysTheReleaseAndProbesAreLeftOut() async throws {
        let directory = try TemporaryDirectory()
        let log = directory.path("serve.log")
        let served = try await runBlocking { try OutpostProcess.serve(directory.path("server.sqlite"), log: log) }
        for path in ["v1/health", "v1/ready", "v1/health"] {
            let (_, response) = try await TestSession.shared.data(from: served.base.appendingPathComponent(path))
            #expect((response as? HTTPURLResponse)?.statusCode == 200, "\(path)")
        }
        // A request that is not a probe is logged (401: no token).
        let (_, refused) = try await TestSession.shared.data(from: served.base.appendingPathComponent("v1/pull"))
        #expect((refused as? HTTPURLResponse)?.statusCode == 401)
        try await eventually("the refused pull's log line") {
            (try? String(contentsOfFile: log, encoding: .utf8))?.contains(#""path":"\/v1\/pull""#) == true
                || (try? String(contentsOfFile: log, encoding: .utf8))?.contains(#""path":"/v1/pull""#) == true
        }
        served.stop()

        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(lines.count >= 4, "\(lines)")
        for line in lines {
            #expect((try? JSONObject.parseObject(line)) != nil, "not a JSON object: \(line)")
        }
        let first = try JSONObject.parseObject(try #require(lines.first))
        #expect(first["version"]?.stringValue == OutpostVersion.current)
        #expect(lines.contains { $0.contains("Stopped.") })
        #expect(!lines.contains { $0.contains("/v1/health") || $0.contains("/v1/ready") }, "\(lines)")
    }

    @Test func logProbesPutsThemBack() async throws {
        let directory = try TemporaryDirectory()
        let log = directory.path("serve.log")
        let served = try await runBlocking {
            try OutpostProcess.serve(directory.path("server.sqlite"), extra: ["--log-probes"], log: log)
        }
        defer { served.stop() }
        let (data, _) = try await TestSession.shared.data(from: served.base.appendingPathComponent("v1/health"))
        // The health answer names the release too.
        #expect(try JSONObject.parseObject(String(decoding: data, as: UTF8.self))["version"]?.stringValue == OutpostVersion.current)
        try await eventually("the health check's log line") {
            (try? String(contentsOfFile: log, encoding: .utf8))?.contains("v1\\/health") == true
                || (try? String(contentsOfFile: log, encoding: .utf8))?.contains("/v1/health") == true
        }
    }

    @Test func versionIsPrinted() throws {
        #expect(try OutpostProcess.run(["--version"]) == "outpost \(OutpostVersion.current)\n")
        #expect(try OutpostProcess.run(["version"]) == "outpost \(OutpostVersion.current)\n")
    }

    @Test func probesAreOnlyTheHealthyOnes() {
        #expect(RequestLogLine.isProbe(path: "/v1/health", status: 200))
        #expect(RequestLogLine.isProbe(path: "/metrics", status: 200))
        #expect(!RequestLogLine.isProbe(path: "/metrics", status: 401), "a scraper without its token is logged")
        #expect(!RequestLogLine.isProbe(path: "/v1/ready", status: 503), "a failing readiness check is logged with its cause")
        #expect(!RequestLogLine.isProbe(path: "/v1/pull", status: 200))
    }
}
