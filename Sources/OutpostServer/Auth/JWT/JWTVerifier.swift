public import Foundation
import OutpostCore

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How the server accepts JWTs from the app's own identity provider.
public struct JWTSettings: Sendable, Equatable {
    /// Where the provider publishes its keys: a file path, or an
    /// `http://`/`https://` URL.
    public var jwks: String
    /// The `iss` every token must carry.
    public var issuer: String
    /// An `aud` every token must carry (a string, or one of an array).
    public var audience: String
    /// The claims that hold the role (`field`, `coordinator`, `admin`) and the team.
    public var roleClaim = "role"
    public var teamClaim = "team"
    /// Clock difference tolerated on `exp`, `nbf` and `iat`.
    public var leeway: TimeInterval = 60
    /// Unknown `kid`: the JWKS is fetched again at most this often.
    public var refetchInterval: TimeInterval = 60

    public init(jwks: String, issuer: String, audience: String) {
        self.jwks = jwks
        self.issuer = issuer
        self.audience = audience
    }
}

/// Verifies JWTs signed with RS256 or ES256 by a key of the configured
/// JWKS, and turns their claims into a ``Principal``.
///
/// Refused: any other algorithm (`none`, the HMAC family, which a public key
/// must never be used as a secret for), a key of the wrong type for the
/// algorithm, a bad signature, a wrong `iss` or `aud`, no `exp` or one past,
/// an `nbf` or `iat` in the future (beyond the leeway), a role claim that is
/// not a role. An unknown `kid` makes one fetch of the JWKS, at most once a
/// refetch interval; when the JWKS cannot be fetched the keys already known
/// keep working, and the server log says so.
final class JWTVerifier: Sendable {
    enum Failure: Error, Equatable, CustomStringConvertible {
        case malformed(String)
        case refused(String)
        case expired

        var description: String {
            switch self {
            case .malformed(let why): return "malformed token: \(why)"
            case .refused(let why): return "token refused: \(why)"
            case .expired: return "token expired"
            }
        }
    }

    let settings: JWTSettings
    private let clock: any WallClock
    private let log: @Sendable (String) -> Void
    private struct Keys {
        var keys: [JSONWebKey] = []
        var fetchedAt: Date?
        var lastAttempt: Date?
    }
    private let state = Locked(Keys())
    /// One fetch at a time: concurrent requests with a new `kid` share it.
    private let fetching = NSLock()

    init(_ settings: JWTSettings, clock: any WallClock, log: @escaping @Sendable (String) -> Void) {
        self.settings = settings
        self.clock = clock
        self.log = log
    }

    /// Loads the keys once; a server configured with a JWKS it cannot read
    /// at start still starts (opaque tokens work), and says why.
    func start() {
        _ = refresh(force: true)
    }

    /// Whether `token` has a JWT's shape (three base64url parts), so opaque
    /// tokens never reach the JWT checks.
    static func looksLikeJWT(_ token: String) -> Bool {
        token.hasPrefix("eyJ") && token.utf8.filter { $0 == UInt8(ascii: ".") }.count == 2
    }

    func principal(_ token: String) throws -> Principal {
        guard token.utf8.count <= 16_384 else { throw Failure.malformed("longer than 16 KiB") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let payloadBytes = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else { throw Failure.malformed("not three base64url parts") }
        guard let header = try? JSONValue.parse(String(decoding: headerBytes, as: UTF8.self)).objectValue else {
            throw Failure.malformed("the header is not a JSON object")
        }
        guard let algorithm = header["alg"]?.stringValue else { throw Failure.malformed("no alg") }
        let kind: JSONWebKey.Kind
        switch algorithm {
        case "RS256": kind = .rsa
        case "ES256": kind = .ecP256
        default: throw Failure.refused("algorithm \(algorithm) is not accepted (RS256 and ES256 are)")
        }
        if header["crit"] != nil { throw Failure.refused("critical header parameters are not supported") }
        let kid = header["kid"]?.stringValue
        let message = Array((parts[0] + "." + parts[1]).utf8)
        guard let key = try key(kid: kid, kind: kind, algorithm: algorithm) else {
            throw Failure.refused("no key \(kid.map { "'\($0)'" } ?? "without a kid") of type \(kind.rawValue) in the JWKS")
        }
        guard key.verifies(signature, over: message) else { throw Failure.refused("the signature does not match") }

        guard let claims = try? JSONValue.parse(String(decoding: payloadBytes, as: UTF8.self)).objectValue else {
            throw Failure.malformed("the payload is not a JSON object")
        }
        let now = clock.now().timeIntervalSince1970
        guard claims["iss"]?.stringValue == settings.issuer else { throw Failure.refused("wrong issuer") }
        let audiences: [String]
        switch claims["aud"] {
        case .string(let one): audiences = [one]
        case .array(let many): audiences = many.compactMap(\.stringValue)
        default: audiences = []
        }
        guard audiences.contains(settings.audience) else { throw Failure.refused("wrong audience") }
        guard let expiry = Self.seconds(claims["exp"]) else { throw Failure.refused("no exp") }
        guard now < expiry + settings.leeway else { throw Failure.expired }
        if let notBefore = Self.seconds(claims["nbf"]), now + settings.leeway < notBefore {
            throw Failure.refused("not valid yet (nbf)")
        }
        if let issuedAt = Self.seconds(claims["iat"]), now + settings.leeway < issuedAt {
            throw Failure.refused("issued in the future (iat)")
        }
        guard let subject = claims["sub"]?.stringValue, !subject.isEmpty, subject.utf8.count <= 256 else {
            throw Failure.refused("no sub")
        }
        guard let roleName = claims[settings.roleClaim]?.stringValue, let role = Role(rawValue: roleName) else {
            throw Failure.refused("the '\(settings.roleClaim)' claim is not a role (field, coordinator, admin)")
        }
        let team = claims[settings.teamClaim]?.stringValue ?? ""
        guard role == .admin || !team.isEmpty else { throw Failure.refused("no '\(settings.teamClaim)' claim") }
        return Principal(user: subject, role: role, team: team, expiresAt: Date(timeIntervalSince1970: expiry))
    }

    private static func seconds(_ value: JSONValue?) -> Double? {
        switch value {
        case .int(let seconds): return Double(seconds)
        case .double(let seconds): return seconds
        default: return nil
        }
    }

    /// The key for `kid` of the right type; an unknown `kid` fetches the
    /// JWKS again first (rate-limited).
    private func key(kid: String?, kind: JSONWebKey.Kind, algorithm: String) throws -> JSONWebKey? {
        func find(_ keys: [JSONWebKey]) -> JSONWebKey? {
            let candidates = keys.filter { $0.kind == kind && ($0.algorithm == nil || $0.algorithm == algorithm) }
            if let kid { return candidates.first { $0.id == kid } }
            // No kid: only a JWKS with one key of this type is unambiguous.
            return candidates.count == 1 ? candidates[0] : nil
        }
        if let found = find(state.current.keys) { return found }
        guard refresh(force: false) else { return nil }
        return find(state.current.keys)
    }

    /// Whether any key is known, after one more try (within the refetch
    /// interval) when none is: without one every JWT is refused, so the
    /// server is not ready.
    package func hasUsableKeys() -> Bool {
        if !state.current.keys.isEmpty { return true }
        _ = refresh(force: false)
        return !state.current.keys.isEmpty
    }

    /// Fetches the JWKS now, whatever the refetch interval (SIGHUP);
    /// returns whether keys were loaded (on failure the known ones stay).
    package func reload() -> Bool { refresh(force: true) }

    /// Fetches the JWKS unless an unknown `kid` made it try within the
    /// refetch interval (`force`: the load at start); returns whether keys were loaded.
    @discardableResult
    private func refresh(force: Bool) -> Bool {
        fetching.lock()
        defer { fetching.unlock() }
        let now = Date()
        // The load at start does not count: a key rotated just before is fetched at once.
        if !force {
            if let last = state.current.lastAttempt, now.timeIntervalSince(last) < settings.refetchInterval { return false }
            state.withLock { $0.lastAttempt = now }
        }
        do {
            let keys = try Self.load(settings.jwks)
            state.withLock { state in
                state.keys = keys
                state.fetchedAt = now
            }
            return true
        } catch {
            let known = state.current.keys.count
            log("The JWKS at \(settings.jwks) could not be read (\(error)); \(known) key\(known == 1 ? "" : "s") already known keep working.")
            return false
        }
    }

    struct JWKSError: Error, CustomStringConvertible {
        var description: String
    }

    /// The usable keys of a JWKS document.
    static func keys(fromJWKS text: String) throws -> [JSONWebKey] {
        guard let document = try? JSONValue.parse(text).objectValue, case .array(let entries)? = document["keys"] else {
            throw JWKSError(description: "not a JWKS document (an object with \"keys\")")
        }
        return entries.compactMap { $0.objectValue.flatMap(JSONWebKey.init) }
    }

    static func load(_ source: String) throws -> [JSONWebKey] {
        guard source.hasPrefix("http://") || source.hasPrefix("https://") else {
            guard let text = try? String(contentsOfFile: source, encoding: .utf8) else {
                throw JWKSError(description: "cannot read the file")
            }
            return try keys(fromJWKS: text)
        }
        guard let url = URL(string: source) else { throw JWKSError(description: "not a URL") }
        let box = Locked<Result<Data, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        var request = URLRequest(url: url)
        request.timeoutInterval = 5
        request.cachePolicy = .reloadIgnoringLocalCacheData
        let task = jwksSession.dataTask(with: request) { data, response, error in
            if let error {
                box.withLock { $0 = .failure(error) }
            } else if let status = (response as? HTTPURLResponse)?.statusCode, status != 200 {
                box.withLock { $0 = .failure(JWKSError(description: "HTTP \(status)")) }
            } else {
                box.withLock { $0 = .success(data ?? Data()) }
            }
            done.signal()
        }
        task.resume()
        guard done.wait(timeout: .now() + 6) == .success, let result = box.current else {
            task.cancel()
            throw JWKSError(description: "no answer within 5 s")
        }
        return try keys(fromJWKS: String(decoding: try result.get(), as: UTF8.self))
    }

    private static let jwksSession: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        return URLSession(configuration: configuration)
    }()
}
