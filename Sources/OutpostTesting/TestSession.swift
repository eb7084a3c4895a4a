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
    public static let shared: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpMaximumConnectionsPerHost = 16
        // Cookies are per host, not per port: one test's console session
        // would ride along to every other test's server. Tests send them by hand.
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpCookieStorage = nil
        return URLSession(configuration: configuration)
    }()
}
