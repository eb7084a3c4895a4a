import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting
#if canImport(Glibc)
import Glibc
#endif

/// `outpost bench idle-stream`: the CPU a live channel costs while nothing
/// happens. One open `GET /v1/stream` to an idle server in this process,
/// through the Linux transport (libcurl) and through URLSession, each for
/// the same time, beside the process's floor with no stream open.
enum IdleStreamBench {
    static func run(seconds: Double) async throws -> [BenchResult] {
        #if os(Linux)
        let directory = try TemporaryDirectory(prefix: "outpost-bench-idle")
        let server = try SyncServer(database: try SQLiteServerDatabase(path: directory.path("server.sqlite")), config: ServerConfig())
        let http = try HTTPServer(port: 0, threads: 4, server: server)
        defer { http.stop() }
        let base = URL(string: "http://127.0.0.1:\(http.port)")!
        try await waitUntilServing(base)
        let token = try server.tokens.issue(user: "c-1", role: .coordinator, team: "t-1", ttl: nil)

        let floor = try await share(over: seconds, with: nil, token: token)
        let curl = try await share(over: seconds, with: CurlTransport(baseURL: base), token: token)
        let session = try await share(over: seconds, with: URLSessionTransport(baseURL: base), token: token)
        var result = BenchResult(
            name: "idle-stream-cpu", figure: curl * 100, unit: "% of a core (CurlTransport)", baseline: session * 100,
            baselineLabel: "URLSessionTransport, same server and time", ratio: session > 0 ? curl / session : nil,
            ratioMeaning: "CurlTransport's CPU / URLSessionTransport's", target: "< 1% of a core", met: curl - floor < 0.01)
        result.details = [
            "seconds": seconds, "floor_percent": floor * 100, "curl_percent": curl * 100, "urlsession_percent": session * 100,
            "curl_above_floor_percent": (curl - floor) * 100,
        ]
        result.notes = [
            "The whole process's CPU (getrusage) while one stream is open to an idle server (heartbeat every 15 s) in the same process; floor: the same time with no stream."
        ]
        return [result]
        #else
        return []
        #endif
    }

    #if os(Linux)
    /// The process's CPU over `seconds` as a share of a core, with a stream open through `transport` (none: the floor).
    private static func share(over seconds: Double, with transport: (any SyncTransport)?, token: String) async throws -> Double {
        var reader: Task<Void, any Error>?
        if let transport {
            let stream = try await transport.openStream(
                TransportRequest(
                    method: "GET", target: "/v1/stream?collections=people", headers: ["Authorization": "Bearer \(token)"],
                    timeout: 10))
            guard stream.status == 200 else { throw CommandFailure("the stream was answered \(stream.status)") }
            reader = Task { for try await _ in stream.bytes {} }
        }
        defer { reader?.cancel() }
        // Past the stream's opening and first heartbeat.
        try await Task.sleep(for: .seconds(1))
        let before = cpu()
        let wall = try await Bench.time { try await Task.sleep(for: .milliseconds(Int64(seconds * 1000))) }
        let used = cpu() - before
        reader?.cancel()
        try await Task.sleep(for: .milliseconds(500))
        return used / wall
    }

    private static func cpu() -> Double { Bench.ownCPUSeconds() }
    #endif
}
