import COpenSSL
import Foundation
import OutpostCore

/// A public key from a JWKS (RFC 7517): RSA, or EC on the P-256 curve.
/// OpenSSL reads it from a DER SubjectPublicKeyInfo built here from the
/// key's JSON members, so no key text format is parsed.
final class JSONWebKey: @unchecked Sendable {
    // @unchecked Sendable: `key` is created in init, freed in deinit, and
    // only read in between (EVP_PKEY verification does not modify it).
    enum Kind: String, Sendable {
        case rsa = "RSA"
        case ecP256 = "EC"
    }

    let id: String?
    let kind: Kind
    /// The algorithm the key is published for, when the JWKS says.
    let algorithm: String?
    fileprivate let key: OpaquePointer

    /// nil when the entry is not a usable public key (another type, another
    /// curve, a private or symmetric key, missing members).
    init?(_ entry: JSONObject) {
        guard entry["use"]?.stringValue.map({ $0 == "sig" }) ?? true else { return nil }
        let spki: [UInt8]
        switch entry["kty"]?.stringValue {
        case "RSA":
            guard let n = entry["n"]?.stringValue.flatMap(Base64URL.decode), let e = entry["e"]?.stringValue.flatMap(Base64URL.decode),
                n.count >= 256, !e.isEmpty
            else { return nil }  // 2048 bits at least
            kind = .rsa
            spki = DER.sequence([
                DER.sequence([DER.objectIdentifier(DER.rsaEncryption), DER.null]),
                DER.bitString(DER.sequence([DER.integer(n), DER.integer(e)])),
            ])
        case "EC":
            guard entry["crv"]?.stringValue == "P-256",
                let x = entry["x"]?.stringValue.flatMap(Base64URL.decode), let y = entry["y"]?.stringValue.flatMap(Base64URL.decode),
                x.count == 32, y.count == 32
            else { return nil }
            kind = .ecP256
            spki = DER.sequence([
                DER.sequence([DER.objectIdentifier(DER.ecPublicKey), DER.objectIdentifier(DER.prime256v1)]),
                DER.bitString([0x04] + x + y),
            ])
        default:
            return nil
        }
        let parsed: OpaquePointer? = spki.withUnsafeBufferPointer { buffer in
            var start: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PUBKEY(nil, &start, buffer.count)
        }
        guard let parsed else {
            ERR_clear_error()
            return nil
        }
        key = parsed
        id = entry["kid"]?.stringValue
        algorithm = entry["alg"]?.stringValue
    }

    deinit { EVP_PKEY_free(key) }

    /// Whether `signature` signs `message` with SHA-256 under this key:
    /// PKCS #1 v1.5 for RSA, ECDSA for EC (the JWS form r‖s, 64 bytes).
    func verifies(_ signature: [UInt8], over message: [UInt8]) -> Bool {
        var der = signature
        if kind == .ecP256 {
            guard signature.count == 64 else { return false }
            der = DER.sequence([DER.integer(Array(signature[0..<32])), DER.integer(Array(signature[32..<64]))])
        }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else {
            ERR_clear_error()
            return false
        }
        let result = EVP_DigestVerify(context, der, der.count, message, message.count)
        ERR_clear_error()
        return result == 1
    }
}

/// The few DER encodings a public key and an ECDSA signature need.
enum DER {
    static let rsaEncryption: [UInt64] = [1, 2, 840, 113_549, 1, 1, 1]
    static let ecPublicKey: [UInt64] = [1, 2, 840, 10_045, 2, 1]
    static let prime256v1: [UInt64] = [1, 2, 840, 10_045, 3, 1, 7]
    static let null: [UInt8] = [0x05, 0x00]

    static func element(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        [tag] + length(content.count) + content
    }

    static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var rest = count
        while rest > 0 {
            bytes.insert(UInt8(rest & 0xFF), at: 0)
            rest >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    static func sequence(_ parts: [[UInt8]]) -> [UInt8] { element(0x30, parts.flatMap { $0 }) }

    /// An unsigned big-endian integer: leading zeros dropped, one added
    /// when the top bit is set (DER integers are signed).
    static func integer(_ magnitude: [UInt8]) -> [UInt8] {
        var bytes = Array(magnitude.drop(while: { $0 == 0 }))
        if bytes.isEmpty { bytes = [0] }
        if bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return element(0x02, bytes)
    }

    static func bitString(_ content: [UInt8]) -> [UInt8] { element(0x03, [0x00] + content) }

    static func objectIdentifier(_ arcs: [UInt64]) -> [UInt8] {
        var content: [UInt8] = [UInt8(arcs[0] * 40 + arcs[1])]
        for arc in arcs.dropFirst(2) {
            var groups: [UInt8] = [UInt8(arc & 0x7F)]
            var rest = arc >> 7
            while rest > 0 {
                groups.insert(UInt8(rest & 0x7F) | 0x80, at: 0)
                rest >>= 7
            }
            content += groups
        }
        return element(0x06, content)
    }
}
