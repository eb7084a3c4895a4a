public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Waits (bounded) until a live server answers `GET /v1/health` through
/// URLSession. At the start of a full run, while other suites hold the few
/// threads Swift concurrency has, a first request can wait half a minute:
/// the examples then run against a server already known to answer, so their
/// own timeouts measure the example, not the run's start.
public func waitUntilServing(_ base: URL) async throws {
    try await awaitBounded("the live server at \(base) to answer its health check", within: .seconds(180)) {
        let health = base.appendingPathComponent("v1/health")
        while true {
            if let (_, response) = try? await TestSession.shared.data(from: health),
                (response as? HTTPURLResponse)?.statusCode == 200
            {
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}
