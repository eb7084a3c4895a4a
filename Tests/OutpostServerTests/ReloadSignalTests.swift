import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import OutpostTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// SIGHUP is the conventional "reload" an operator's service manager sends;
/// it must never stop a server, whatever it was started with.
@Suite("SIGHUP", .timeLimit(.minutes(2)))
struct ReloadSignalTests {
    @Test func aServerWithoutTLSOrJWKSKeepsServingAfterSIGHUPAndSaysSo() async throws {
        let directory = try TemporaryDirectory()
        let log = directory.path("serve.log")
        let served = try await runBlocking { try OutpostProcess.serve(directory.path("server.sqlite"), log: log) }
        defer { served.stop() }
        served.process.signal(SIGHUP)
        try await eventually("the log says what SIGHUP did") {
            (try? String(contentsOfFile: log, encoding: .utf8))?.contains("Received SIGHUP: nothing to reload") == true
        }
        // Twice: a second signal is handled the same way.
        served.process.signal(SIGHUP)
        try await Task.sleep(for: .milliseconds(300))
        #expect(served.process.isRunning, "SIGHUP stopped the server")
        let (_, response) = try await TestSession.shared.data(from: served.base.appendingPathComponent("v1/health"))
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
    }
}
