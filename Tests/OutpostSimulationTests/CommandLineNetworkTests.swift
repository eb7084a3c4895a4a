import Foundation
import OutpostCore
import OutpostServer
import OutpostTesting
import Testing

/// `outpost sync` as a person meets the network between them and the
/// server: a proxy whose servers are restarting, a certificate this
/// computer does not trust.
@Suite("Command line and the network", .timeLimit(.minutes(3)))
struct CommandLineNetworkTests {
    typealias Workstation = CommandLineTests.Workstation

    /// nginx answers 502 while the server behind it restarts: the sync
    /// tries again within its --timeout and sends the change, instead of
    /// ending with changes unconfirmed.
    @Test(.enabled(if: ReverseProxy.isInstalled(.nginx)))
    func aBadGatewayWhileTheServerRestartsIsTriedAgainWithinTheTimeout() async throws {
        let station = try Workstation()
        let proxy = try await ReverseProxy(.nginx, upstreamPort: station.port)
        let token = try station.server.tokens.issue(user: "ana", role: .field, team: "north", ttl: nil)
        let login = try await station.run(["login", "--server", proxy.base.absoluteString, "--token", token])
        try #require(login.status == 0, "\(login.stderr)")
        #expect(try await station.run(["add", "people", "name=Ana"]).status == 0)

        station.stopServer()
        let sync = Task { try await station.run(["sync", "--timeout", "40"]) }
        // The proxy answers 502 meanwhile; the server is back after a few seconds.
        try await Task.sleep(for: .seconds(3))
        try station.startServer()
        let synced = try await sync.value
        #expect(synced.status == 0, "\(synced.stderr)")
        #expect(synced.stdout.contains("sent 1, confirmed 1"), "\(synced.stdout)")
        #expect(synced.stderr.contains("trying again"), "the wait is said: \(synced.stderr)")
    }

    /// Without the server's CA, the message says the certificate is not
    /// trusted and how to give it, never "try again when the network is back".
    @Test func anUntrustedCertificateIsSaidAsSuch() async throws {
        let station = try Workstation()
        let directory = try TemporaryDirectory()
        func makeCertificate(_ name: String) async throws -> HTTPServer.TLSFiles {
            let files = HTTPServer.TLSFiles(certificate: directory.path("\(name).crt"), key: directory.path("\(name).key"))
            let made = try await runBlocking {
                try ChildProcess.run(
                    URL(fileURLWithPath: "/usr/bin/openssl"),
                    [
                        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", files.key,
                        "-out", files.certificate, "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    ])
            }
            try #require(made.status == 0, "\(made.stderr)")
            return files
        }
        let first = try await makeCertificate("first")
        station.stopServer()
        var https = try HTTPServer(port: 0, tls: first, server: station.server)
        let address = "https://127.0.0.1:\(https.port)"
        let token = try station.server.tokens.issue(user: "ana", role: .field, team: "north", ttl: nil)
        let login = try await station.run(["login", "--server", address, "--token", token, "--ca-file", first.certificate])
        try #require(login.status == 0, "\(login.stderr)")
        #expect(try await station.run(["add", "people", "name=Ana"]).status == 0)
        #expect(try await station.run(["sync"]).status == 0)

        // The server now presents a certificate of another, unknown CA.
        let port = https.port
        https.stop()
        let second = try await makeCertificate("second")
        // The port the profile names; another test's connection may hold it for a moment.
        var attempts = 0
        while true {
            do {
                https = try HTTPServer(port: port, tls: second, server: station.server)
                break
            } catch let error as ServeError where attempts < 50 {
                _ = error
                attempts += 1
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        defer { https.stop() }
        let refused = try await station.run(["sync"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("certificate is not trusted"), "\(refused.stderr)")
        #expect(refused.stderr.contains("--ca-file"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("network is back"), "\(refused.stderr)")
    }
}
