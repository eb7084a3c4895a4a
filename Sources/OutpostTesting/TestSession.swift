#if canImport(FoundationNetworking)
import Foundation
public import FoundationNetworking
#else
public import Foundation
#endif

/// The URLSession tests and benchmarks use for their own requests.
///
/// `URLSession.shared` keeps a response cache that every request of the
/// process checks under one lock, and on Linux writes to disk: at a full
/// run's start, with hundreds of requests from parallel suites, that cache
/// made requests wait their turn for tens of seconds. Sync answers must
/// never be cached anyway; this session has no cache at all.
public enum TestSession {
    public static let shared = session()

    /// For requests with a body that may be refused or cut (blob uploads):
    /// each on a connection of its own, closed after its answer. Sent on a
    /// kept-alive connection the server closed for idleness (ten seconds:
    /// a full run on two cores can pause a test that long), such a request
    /// failed with "Send failure: Broken pipe", and Foundation on Linux does
    /// not send a body again by itself (the engine's uploads take the same care).
    public static let uploads = session(headers: ["Connection": "close"])

    private static func session(headers: [String: String] = [:]) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpMaximumConnectionsPerHost = 16
        // Cookies are per host, not per port: one test's console session
        // would ride along to every other test's server. Tests send them by hand.
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpCookieStorage = nil
        if !headers.isEmpty { configuration.httpAdditionalHeaders = headers }
        return URLSession(configuration: configuration)
    }
}
