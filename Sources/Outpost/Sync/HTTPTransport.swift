public import Foundation

/// The transport an app uses to reach its server over HTTP, the right one
/// for the platform: ``URLSessionTransport`` on Apple platforms, and
/// ``CurlTransport`` (libcurl) on Linux, where URLSession's networking keeps
/// a core busy for as long as a live channel is open.
///
/// ```swift
/// let engine = SyncEngine(store: store, transport: HTTPTransport.make(baseURL: server), token: token)
/// ```
public enum HTTPTransport {
    /// A transport for the server at `baseURL`, trusting the system's certificate authorities.
    public static func make(baseURL: URL) -> any SyncTransport {
        #if canImport(CCurl)
        return CurlTransport(baseURL: baseURL)
        #else
        return URLSessionTransport(baseURL: baseURL)
        #endif
    }

    /// A transport for the server at `baseURL`. `trustedCertificates` is
    /// the path of a PEM file of the certificate authorities to trust
    /// instead of the system's (a server whose certificate its own CA
    /// signed), or nil for the system's.
    ///
    /// - Throws: ``HTTPTransportError`` when the file cannot be read, or
    ///   on Apple platforms, where trust comes from the device's settings
    ///   (a profile that installs the CA) and a file is not supported.
    public static func make(baseURL: URL, trustedCertificates: String?) throws -> any SyncTransport {
        guard let trustedCertificates else { return make(baseURL: baseURL) }
        #if canImport(CCurl)
        guard FileManager.default.isReadableFile(atPath: trustedCertificates) else {
            throw HTTPTransportError(description: "cannot read the trusted certificates file \(trustedCertificates)")
        }
        return CurlTransport(baseURL: baseURL, trustedCertificates: trustedCertificates)
        #else
        throw HTTPTransportError(
            description: "a trusted certificates file is not supported on this platform: install the CA in the device's settings")
        #endif
    }
}

/// Why ``HTTPTransport`` could not make a transport.
public struct HTTPTransportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong, in a sentence.
    public var description: String
}
