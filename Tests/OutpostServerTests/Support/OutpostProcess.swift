import Foundation
import OutpostCore
import OutpostServer
import OutpostTesting
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The `outpost` executable, run as a child process.
enum OutpostProcess {
    static var executable: URL { ChildProcess.product("outpost") }

    /// Runs a command to completion; returns stdout, throws with stderr on failure.
    static func run(_ arguments: [String]) throws -> String {
        let result = try ChildProcess.run(executable, arguments)
        guard result.status == 0 else { throw ProcessFailure(status: result.status, stderr: result.stderr) }
        return result.stdout
    }

    struct ProcessFailure: Error, CustomStringConvertible {
        var status: Int32
        var stderr: String
        var description: String { "exit \(status): \(stderr)" }
    }

    /// Starts `outpost serve` on a free port and waits until it listens.
    /// `log`: a file for the server's request log (otherwise `--quiet`).
    /// `port`: 0 for a free one; a server started again on its predecessor's port keeps its address.
    static func serve(
        _ location: String, extra: [String] = [], scheme: String = "http", log: String? = nil, port: Int = 0
    ) throws -> RunningServer {
        var arguments = ["serve", "--database", location, "--port", String(port)] + (log == nil ? ["--quiet"] : []) + extra
        // The tests' PostgreSQL is shared by every test, and so is its write lock.
        if DatabaseLocation.isPostgres(location) {
            arguments += ["--lock-timeout", "60", "--statement-timeout", "120", "--feed-hold-ms", "20000"]
        }
        let process = try SpawnedProcess(executable, arguments, stdout: .pipe, stderr: log.map { .file($0) } ?? .discard)
        var buffer = Data()
        while !buffer.contains(UInt8(ascii: "\n")) {
            let chunk = process.standardOutput!.availableData
            if chunk.isEmpty { throw ProcessFailure(status: -1, stderr: "outpost serve exited before listening") }
            buffer += chunk
        }
        let line = String(decoding: buffer, as: UTF8.self)
        guard let port = line.split(separator: " ").last.flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) })
        else { throw ProcessFailure(status: -1, stderr: "unexpected first line: \(line)") }
        return RunningServer(process: process, base: URL(string: "\(scheme)://127.0.0.1:\(port)")!)
    }
}

/// A live `outpost serve` child process.
struct RunningServer {
    let process: SpawnedProcess
    let base: URL

    /// SIGTERM, then SIGKILL if it has not exited within 30 s.
    func stop() {
        process.signal(SIGTERM)
        process.killIfRunning(after: .seconds(30))
        process.waitUntilExit()
    }

    func push(_ request: PushRequest, token: String) async throws -> PushResponse {
        var urlRequest = URLRequest(url: base.appendingPathComponent("v1/push"))
        urlRequest.httpMethod = "POST"
        urlRequest.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        urlRequest.setValue("application/json", forHTTPHeaderField: "Content-Type")
        urlRequest.httpBody = try WireCoding.encode(request)
        let (data, _) = try await TestSession.shared.data(for: urlRequest)
        return try WireCoding.decode(PushResponse.self, from: data)
    }

    func pull(cursor: String?, token: String, limit: Int = 1) async throws -> PullResponse {
        var target = "/v1/pull?collections=people&limit=\(limit)"
        if let cursor { target += "&cursor=\(cursor)" }
        var urlRequest = URLRequest(url: URL(string: target, relativeTo: base)!)
        urlRequest.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let (data, _) = try await TestSession.shared.data(for: urlRequest)
        return try WireCoding.decode(PullResponse.self, from: data)
    }
}
