#if os(Linux) || os(macOS)
public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A real reverse proxy from the distribution (haproxy or nginx) in front of
/// a local server, started by a test with a configuration written to a
/// temporary folder, run as the current user, stopped when released.
public final class ReverseProxy: Sendable {
    public enum Kind: String, Sendable, CaseIterable {
        /// haproxy in HTTP mode with ordinary timeouts.
        case haproxy
        /// nginx as most sites set it up: HTTP/1.1 upstream, buffering on
        /// (which honours the server's `X-Accel-Buffering: no`).
        case nginx
        /// nginx set up to hold streams back, as a common configuration
        /// does: `X-Accel-Buffering` ignored and every text answer gzipped
        /// by nginx (the server asked for plain answers, so it has them to
        /// compress), so events wait in the compressor until its buffer fills.
        case bufferingNginx = "nginx-buffering"
    }

    /// The proxy's address.
    public let base: URL
    private let process: SpawnedProcess
    private let directory: String

    /// Whether the proxy's program is installed (`scripts/ensure-deps` installs both).
    public static func isInstalled(_ kind: Kind) -> Bool {
        FileManager.default.isExecutableFile(atPath: executable(kind))
    }

    private static func executable(_ kind: Kind) -> String { kind == .haproxy ? "/usr/sbin/haproxy" : "/usr/sbin/nginx" }

    /// Starts `kind` in front of `127.0.0.1:upstreamPort`; returns once it accepts connections.
    public convenience init(_ kind: Kind, upstreamPort: UInt16) async throws {
        try await self.init(kind, upstreamPorts: [upstreamPort])
    }

    /// Starts `kind` in front of several servers, taking turns between them
    /// request by request (haproxy: round robin, each server health-checked
    /// on `/v1/health` every 200 ms and taken out of the turn when it fails;
    /// a request whose connection is refused goes to another server).
    public init(_ kind: Kind, upstreamPorts: [UInt16]) async throws {
        precondition(!upstreamPorts.isEmpty)
        let upstreamPort = upstreamPorts[0]
        directory = NSTemporaryDirectory() + "outpost-proxy-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let port = try Self.freePort()
        let config = directory + "/proxy.conf"
        let arguments: [String]
        switch kind {
        case .haproxy:
            try """
            global
                maxconn 4096
            defaults
                mode http
                timeout connect 5s
                timeout client 60s
                timeout server 60s
            frontend outpost
                bind 127.0.0.1:\(port)
                default_backend server
            backend server
                balance roundrobin
                option httpchk GET /v1/health
                option redispatch
                retries 3
                http-reuse never
            \(upstreamPorts.enumerated().map { "    server s\($0.offset) 127.0.0.1:\($0.element) check inter 200ms fall 1 rise 2" }.joined(separator: "\n"))

            """.write(toFile: config, atomically: true, encoding: .utf8)
            arguments = ["-f", config, "-db"]
        case .nginx, .bufferingNginx:
            let ignore =
                kind == .bufferingNginx
                ? "proxy_ignore_headers X-Accel-Buffering;\n        proxy_set_header Accept-Encoding \"\";\n        gzip on;\n        gzip_types text/event-stream;\n        gzip_min_length 0;"
                : ""
            try """
            worker_processes 1;
            daemon off;
            pid \(directory)/nginx.pid;
            error_log \(directory)/error.log warn;
            events { worker_connections 1024; }
            http {
                access_log off;
                client_body_temp_path \(directory)/body;
                proxy_temp_path \(directory)/proxy;
                fastcgi_temp_path \(directory)/fastcgi;
                uwsgi_temp_path \(directory)/uwsgi;
                scgi_temp_path \(directory)/scgi;
                server {
                    listen 127.0.0.1:\(port);
                    location / {
                        proxy_pass http://127.0.0.1:\(upstreamPort);
                        proxy_http_version 1.1;
                        proxy_set_header Connection "";
                        proxy_read_timeout 60s;
                        proxy_buffering on;
                        \(ignore)
                    }
                }
            }
            """.write(toFile: config, atomically: true, encoding: .utf8)
            arguments = ["-p", directory, "-c", config]
        }
        process = try SpawnedProcess(
            URL(fileURLWithPath: Self.executable(kind)), arguments, stderr: .file(directory + "/stderr.log"))
        base = URL(string: "http://127.0.0.1:\(port)")!
        try await Self.waitForListener(port: port, process: process, what: kind.rawValue, log: directory + "/stderr.log")
    }

    deinit {
        process.signal(SIGTERM)
        process.killIfRunning(after: .seconds(3))
        try? FileManager.default.removeItem(atPath: directory)
    }

    private static func waitForListener(port: UInt16, process: SpawnedProcess, what: String, log: String) async throws {
        // Starting alone takes milliseconds; a full test run on two busy
        // cores once kept haproxy and nginx from listening for over 10 s.
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if !process.isRunning {
                let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                throw SpawnedProcess.SpawnError(reason: "\(what) exited at start: \(output)")
            }
            if canConnect(port: port) { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw SpawnedProcess.SpawnError(reason: "\(what) did not listen on port \(port) within 60 seconds")
    }

    private static func canConnect(port: UInt16) -> Bool {
        let fd = socket(AF_INET, streamSocketType, 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopbackAddress(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    /// A port nothing listens on now (bound to port 0, then released).
    static func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, streamSocketType, 0)
        guard fd >= 0 else { throw SpawnedProcess.SpawnError(reason: "socket failed") }
        defer { close(fd) }
        var address = loopbackAddress(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw SpawnedProcess.SpawnError(reason: "bind failed") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return UInt16(bigEndian: address.sin_port)
    }
}
#endif
