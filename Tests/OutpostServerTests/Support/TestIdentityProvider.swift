import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// An identity provider for tests: keys made by the OpenSSL command line
/// (an implementation independent of the server's checks), tokens signed by
/// it, and a JWKS served from a local HTTP server the test can change or stop.
final class TestIdentityProvider: @unchecked Sendable {
    // @unchecked Sendable: `served` and `fetches` go through `Locked`; the rest is set in init.
    struct Key {
        var id: String
        var algorithm: String  // RS256 or ES256
        var privateKeyFile: String
        var jwk: JSONObject
    }

    let directory: TemporaryDirectory
    let issuer = "https://id.example.test/"
    let audience = "outpost-field-app"
    private let served = Locked<[JSONObject]>([])
    private let reachable = Locked(true)
    private let fetchCount = Locked(0)
    private var http: HTTPServer?

    init() throws {
        directory = try TemporaryDirectory(prefix: "outpost-idp")
        http = try HTTPServer(port: 0, threads: 2) { [served, reachable, fetchCount] _ in
            fetchCount.withLock { $0 += 1 }
            guard reachable.current else { return HTTPResponse(status: 503, body: Array("down".utf8)) }
            let document: JSONValue = .object(["keys": .array(served.current.map { .object($0) })])
            return HTTPResponse(
                status: 200, headers: ["Content-Type": "application/json"], body: Array(((try? document.jsonText()) ?? "").utf8))
        }
    }

    deinit { http?.stop() }

    var jwksURL: String { "http://127.0.0.1:\(http!.port)/jwks.json" }
    var fetches: Int { fetchCount.current }

    func settings(jwks: String? = nil) -> JWTSettings {
        JWTSettings(jwks: jwks ?? jwksURL, issuer: issuer, audience: audience)
    }

    /// Publishes exactly these keys.
    func publish(_ keys: [Key]) { served.withLock { $0 = keys.map(\.jwk) } }
    func setReachable(_ value: Bool) { reachable.withLock { $0 = value } }

    /// Runs the OpenSSL command line on a thread of its own: key generation
    /// takes a while, and the cooperative pool must not wait for it.
    static func openssl(_ arguments: [String]) async throws -> Data {
        try await runBlocking { try opensslNow(arguments) }
    }

    private static func opensslNow(_ arguments: [String]) throws -> Data {
        let result = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/openssl"), arguments)
        guard result.status == 0 else { throw JWKSTestError(description: "openssl \(arguments.first ?? ""): \(result.stderr)") }
        return Data(result.stdout.utf8)
    }

    struct JWKSTestError: Error, CustomStringConvertible { var description: String }

    /// A new RSA (2048-bit) or P-256 key and its public JWK.
    func makeKey(_ id: String, _ algorithm: String) async throws -> Key {
        let file = directory.path("\(id).pem")
        if algorithm == "RS256" {
            _ = try await Self.openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", file])
            let modulusLine = String(decoding: try await Self.openssl(["rsa", "-in", file, "-modulus", "-noout"]), as: UTF8.self)
            let hex = modulusLine.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "Modulus=", with: "")
            let modulus = Self.bytes(hex: hex)
            return Key(
                id: id, algorithm: algorithm, privateKeyFile: file,
                jwk: ["kty": "RSA", "kid": .string(id), "use": "sig", "alg": "RS256", "n": .string(Base64URL.encode(modulus)), "e": "AQAB"])
        }
        _ = try await Self.openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", file])
        let publicDER = directory.path("\(id).pub.der")
        _ = try await Self.openssl(["pkey", "-in", file, "-pubout", "-outform", "DER", "-out", publicDER])
        // A P-256 SubjectPublicKeyInfo ends with the point 04‖x‖y.
        let point = Array(try Data(contentsOf: URL(fileURLWithPath: publicDER)).suffix(65))
        return Key(
            id: id, algorithm: algorithm, privateKeyFile: file,
            jwk: [
                "kty": "EC", "kid": .string(id), "crv": "P-256", "x": .string(Base64URL.encode(Array(point[1..<33]))),
                "y": .string(Base64URL.encode(Array(point[33..<65]))),
            ])
    }

    /// The claims of a valid token for `user`, valid for an hour from `now`.
    func claims(_ user: String, role: String = "field", team: String = "t-1", now: Date) -> JSONObject {
        let seconds = Int64(now.timeIntervalSince1970)
        return [
            "iss": .string(issuer), "aud": .string(audience), "sub": .string(user), "role": .string(role),
            "team": .string(team), "iat": .int(seconds), "nbf": .int(seconds), "exp": .int(seconds + 3600),
        ]
    }

    /// A compact JWS over `claims`, signed by `key` with its algorithm
    /// unless `header` says otherwise.
    func token(_ claims: JSONObject, key: Key, header: JSONObject? = nil) async throws -> String {
        let header = header ?? ["alg": .string(key.algorithm), "typ": "JWT", "kid": .string(key.id)]
        let signingInput = Base64URL.encode(Array(try header.jsonText().utf8)) + "."
            + Base64URL.encode(Array(try claims.jsonText().utf8))
        return signingInput + "." + Base64URL.encode(try await sign(signingInput, key: key))
    }

    func sign(_ input: String, key: Key) async throws -> [UInt8] {
        let message = directory.path("message-\(UUID().uuidString)")
        let signature = message + ".sig"
        try Data(input.utf8).write(to: URL(fileURLWithPath: message))
        _ = try await Self.openssl(["dgst", "-sha256", "-sign", key.privateKeyFile, "-out", signature, message])
        let der = Array(try Data(contentsOf: URL(fileURLWithPath: signature)))
        return key.algorithm == "ES256" ? Self.rawECDSA(der) : der
    }

    /// HMAC-SHA256 of `input` with `secret` as the key, by the OpenSSL command line.
    func hmac(_ input: String, secret: [UInt8]) async throws -> [UInt8] {
        let message = directory.path("hmac-\(UUID().uuidString)")
        let signature = message + ".sig"
        try Data(input.utf8).write(to: URL(fileURLWithPath: message))
        let hexKey = secret.map { String(format: "%02x", $0) }.joined()
        _ = try await Self.openssl(["dgst", "-sha256", "-mac", "HMAC", "-macopt", "hexkey:\(hexKey)", "-out", signature, "-binary", message])
        return Array(try Data(contentsOf: URL(fileURLWithPath: signature)))
    }

    /// An ECDSA signature's DER (SEQUENCE of two INTEGERs) as JWS wants it: r‖s, 32 bytes each.
    static func rawECDSA(_ der: [UInt8]) -> [UInt8] {
        var index = 2
        if der[1] & 0x80 != 0 { index += Int(der[1] & 0x7F) }
        func integer() -> [UInt8] {
            let length = Int(der[index + 1])
            let value = Array(der[(index + 2)..<(index + 2 + length)].drop(while: { $0 == 0 }))
            index += 2 + length
            return [UInt8](repeating: 0, count: 32 - value.count) + value
        }
        return integer() + integer()
    }

    static func bytes(hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex, let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) {
            bytes.append(UInt8(hex[index..<next], radix: 16) ?? 0)
            index = next
        }
        return bytes
    }
}
