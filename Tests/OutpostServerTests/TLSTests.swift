import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// `outpost serve --tls-cert --tls-key`: HTTPS through libmicrohttpd's
/// GnuTLS, checked with `curl --cacert` against a certificate the test
/// makes; plain HTTP gets no answer; a stream works over TLS and survives a
/// SIGHUP that installs a new certificate for new connections.
///
/// URLSession on Linux trusts only the system's certificate bundle (no
/// per-session trust), so the independent client here is curl.
@Suite("TLS", .timeLimit(.minutes(3)))
struct TLSTests {
    /// A self-signed certificate for 127.0.0.1, made by the OpenSSL command line.
    static func certificate(in directory: TemporaryDirectory, _ name: String) async throws -> (certificate: String, key: String) {
        let certificate = directory.path("\(name).crt")
        let key = directory.path("\(name).key")
        _ = try await TestIdentityProvider.openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", certificate,
            "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        ])
        return (certificate, key)
    }

    static func curl(_ arguments: [String]) throws -> ChildProcess.Output {
        try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/curl"), ["-sS", "--max-time", "20"] + arguments, timeout: .seconds(30))
    }

    @Test func httpsAnswersWithTheCertificatePlainHTTPGetsNothingAndABadKeyIsRefusedAtStart() async throws {
        let directory = try TemporaryDirectory()
        let first = try await Self.certificate(in: directory, "first")
        let other = try await Self.certificate(in: directory, "other")
        let server = try SyncServer(database: try SQLiteServerDatabase(path: directory.path("server.sqlite")), config: try ServerConfig())
        let http = try HTTPServer(port: 0, tls: HTTPServer.TLSFiles(certificate: first.certificate, key: first.key), server: server)
        defer { http.stop() }
        let base = "https://127.0.0.1:\(http.port)"
        let token = try server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)

        let health = try await runBlocking { try Self.curl(["--cacert", first.certificate, "\(base)/v1/health"]) }
        #expect(health.status == 0, "\(health.stderr)")
        #expect(health.stdout.contains("server_time"))
        let push = try await runBlocking {
            try Self.curl([
                "--cacert", first.certificate, "-H", "Authorization: Bearer \(token)", "-H", "Content-Type: application/json",
                "--data", #"{"client_id":"8f1e0c36-6a3f-4e3b-9a49-2d3c6a0f8e11","mutations":[{"seq":1,"id":"0190e3c4-0000-7000-8000-000000000001","op":"create","collection":"people","uuid":"0190e3c4-0000-7000-8000-0000000000aa","data":{"name":"Ana"}}]}"#,
                "\(base)/v1/push",
            ])
        }
        #expect(push.stdout.contains(#""status":"applied""#), "\(push.stdout) \(push.stderr)")
        // Another certificate's trust does not verify this server.
        let untrusted = try await runBlocking { try Self.curl(["--cacert", other.certificate, "\(base)/v1/health"]) }
        #expect(untrusted.status != 0)
        // Plain HTTP on the TLS port: the handshake fails, nothing is answered.
        let plain = try await runBlocking { try Self.curl(["http://127.0.0.1:\(http.port)/v1/health"]) }
        #expect(plain.status != 0)
        #expect(!plain.stdout.contains("server_time"))

        // A key that is not the certificate's: a clear error, no server.
        #expect {
            _ = try HTTPServer(port: 0, tls: HTTPServer.TLSFiles(certificate: first.certificate, key: other.key), server: server)
        } throws: { error in
            (error as? ServeError)?.description.contains("does not belong to the certificate") == true
        }
        #expect {
            _ = try HTTPServer(
                port: 0, tls: HTTPServer.TLSFiles(certificate: directory.path("missing.crt"), key: first.key), server: server)
        } throws: { error in
            (error as? ServeError)?.description.contains("cannot read the certificate file") == true
        }
    }

    @Test func aStreamOverTLSOutlivesACertificateReloadOnSIGHUP() async throws {
        let directory = try TemporaryDirectory()
        let first = try await Self.certificate(in: directory, "first")
        let second = try await Self.certificate(in: directory, "second")
        let certificate = directory.path("serving.crt")
        let key = directory.path("serving.key")
        try FileManager.default.copyItem(atPath: first.certificate, toPath: certificate)
        try FileManager.default.copyItem(atPath: first.key, toPath: key)
        let database = directory.path("server.sqlite")
        let token = try await runBlocking {
            try OutpostProcess.run(["token", "issue", "--database", database, "--user", "u-1", "--role", "field", "--team", "t-1"])
        }.split(separator: "\n").last.map(String.init) ?? ""
        let served = try await runBlocking {
            try OutpostProcess.serve(database, extra: ["--tls-cert", certificate, "--tls-key", key], scheme: "https")
        }
        defer { served.stop() }
        let base = served.base.absoluteString

        // A stream opened with the first certificate.
        let stream = try SpawnedProcess(
            URL(fileURLWithPath: "/usr/bin/curl"),
            ["-sSN", "--max-time", "60", "--cacert", first.certificate, "-H", "Authorization: Bearer \(token)", "\(base)/v1/stream?collections=people"],
            stdout: .pipe)
        defer { stream.signal(SIGKILL) }
        let received = Locked(Data())
        let output = stream.standardOutput!
        Thread.detachNewThread {
            while true {
                let chunk = output.availableData
                if chunk.isEmpty { return }
                received.withLock { $0.append(chunk) }
            }
        }
        try await eventually("the stream over TLS sent its first heartbeat") {
            String(decoding: received.current, as: UTF8.self).contains("event: heartbeat")
        }

        // The certificate is replaced on disk and the server told.
        try FileManager.default.removeItem(atPath: certificate)
        try FileManager.default.removeItem(atPath: key)
        try FileManager.default.copyItem(atPath: second.certificate, toPath: certificate)
        try FileManager.default.copyItem(atPath: second.key, toPath: key)
        served.process.signal(SIGHUP)
        try await eventually("new connections get the second certificate") {
            (try? Self.curl(["--cacert", second.certificate, "\(base)/v1/health"]).status) == 0
        }
        let withOld = try await runBlocking { try Self.curl(["--cacert", first.certificate, "\(base)/v1/health"]) }
        #expect(withOld.status != 0, "a new connection still got the first certificate")

        // The stream opened before the reload is still up and carries a change.
        let push = try await runBlocking {
            try Self.curl([
                "--cacert", second.certificate, "-H", "Authorization: Bearer \(token)", "-H", "Content-Type: application/json",
                "--data", #"{"client_id":"8f1e0c36-6a3f-4e3b-9a49-2d3c6a0f8e12","mutations":[{"seq":1,"id":"0190e3c4-0000-7000-8000-000000000002","op":"create","collection":"people","uuid":"0190e3c4-0000-7000-8000-0000000000bb","data":{"name":"After reload"}}]}"#,
                "\(base)/v1/push",
            ])
        }
        #expect(push.stdout.contains(#""status":"applied""#), "\(push.stdout) \(push.stderr)")
        try await eventually("the change reached the stream opened before the reload") {
            String(decoding: received.current, as: UTF8.self).contains("After reload")
        }
        #expect(stream.isRunning, "the stream was not dropped by the reload")
    }
}
