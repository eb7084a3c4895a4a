import Foundation
#if canImport(CryptoKit)
import CryptoKit
#elseif canImport(COpenSSL)
import COpenSSL
#endif

/// Seals and opens the payloads the store keeps at rest: every
/// record's fields, every queued change and every conflict report. What
/// sync needs without the key — uuids, versions, states, server times —
/// stays readable.
///
/// The key is the app's to keep (the Keychain on Apple platforms); a store
/// opened with another key, or none, cannot read what was sealed.
public protocol PayloadCipher: Sendable {
    /// The plaintext sealed, with whatever the cipher needs to open it again.
    func seal(_ plaintext: [UInt8]) throws -> [UInt8]
    /// The plaintext of a sealed payload; throws when it was altered or sealed with another key.
    func open(_ sealed: [UInt8]) throws -> [UInt8]
}

/// AES-256-GCM with a random 96-bit nonce per payload: `nonce ‖ ciphertext ‖ tag`.
/// CryptoKit on Apple platforms, OpenSSL elsewhere; the two read each other's output.
public struct AESGCMCipher: PayloadCipher {
    private let key: [UInt8]
    static let nonceSize = 12
    static let tagSize = 16

    /// `key` must be 32 bytes (256 bits), e.g. from `AESGCMCipher.makeKey()`.
    public init(key: [UInt8]) throws {
        guard key.count == 32 else { throw CipherError.badKey }
        self.key = key
    }

    /// A new random 256-bit key.
    public static func makeKey() -> [UInt8] { randomBytes(32) }

    /// Random bytes drawn 8 at a time: each draw is a system call, and a
    /// byte-at-a-time nonce doubled the cost of sealing a record.
    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count + 8)
        while bytes.count < count { withUnsafeBytes(of: generator.next()) { bytes.append(contentsOf: $0) } }
        return Array(bytes.prefix(count))
    }

    /// Seals the plaintext under a fresh random nonce, as `nonce ‖ ciphertext ‖ tag`.
    public func seal(_ plaintext: [UInt8]) throws -> [UInt8] {
        let nonce = Self.randomBytes(Self.nonceSize)
        #if canImport(CryptoKit)
        let box = try AES.GCM.seal(plaintext, using: SymmetricKey(data: key), nonce: AES.GCM.Nonce(data: nonce))
        return nonce + Array(box.ciphertext) + Array(box.tag)
        #else
        return try OpenSSLGCM.seal(plaintext, key: key, nonce: nonce)
        #endif
    }

    /// Opens a sealed payload; throws when it is too short, was altered, or was sealed with another key.
    public func open(_ sealed: [UInt8]) throws -> [UInt8] {
        guard sealed.count >= Self.nonceSize + Self.tagSize else { throw CipherError.notSealed }
        let nonce = Array(sealed[..<Self.nonceSize])
        let ciphertext = Array(sealed[Self.nonceSize..<(sealed.count - Self.tagSize)])
        let tag = Array(sealed[(sealed.count - Self.tagSize)...])
        #if canImport(CryptoKit)
        do {
            let box = try AES.GCM.SealedBox(nonce: AES.GCM.Nonce(data: nonce), ciphertext: ciphertext, tag: tag)
            return Array(try AES.GCM.open(box, using: SymmetricKey(data: key)))
        } catch {
            throw CipherError.notSealed
        }
        #else
        return try OpenSSLGCM.open(ciphertext, tag: tag, key: key, nonce: nonce)
        #endif
    }
}

/// Why a payload could not be sealed or opened.
public enum CipherError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The key is not 32 bytes.
    case badKey
    /// Altered, truncated, or sealed with another key.
    case notSealed
    /// The crypto library failed.
    case failed

    public var description: String {
        switch self {
        case .badKey: return "An AES-256-GCM key is 32 bytes."
        case .notSealed: return "Stored data could not be opened: it was altered or sealed with another key."
        case .failed: return "The crypto library failed."
        }
    }
}

#if !canImport(CryptoKit) && canImport(COpenSSL)
/// AES-256-GCM through OpenSSL's EVP interface.
enum OpenSSLGCM {
    static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8]) throws -> [UInt8] {
        guard let context = EVP_CIPHER_CTX_new() else { throw CipherError.failed }
        defer { EVP_CIPHER_CTX_free(context) }
        guard EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), nil, key, nonce) == 1 else { throw CipherError.failed }
        var output = [UInt8](repeating: 0, count: AESGCMCipher.nonceSize + plaintext.count + AESGCMCipher.tagSize)
        output.replaceSubrange(0..<AESGCMCipher.nonceSize, with: nonce)
        var written: Int32 = 0
        let ok = output.withUnsafeMutableBufferPointer { buffer -> Bool in
            let body = buffer.baseAddress! + AESGCMCipher.nonceSize
            guard plaintext.isEmpty || EVP_EncryptUpdate(context, body, &written, plaintext, Int32(plaintext.count)) == 1 else {
                return false
            }
            var final: Int32 = 0
            guard EVP_EncryptFinal_ex(context, body + Int(written), &final) == 1 else { return false }
            let tag = body + plaintext.count
            return EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, Int32(AESGCMCipher.tagSize), tag) == 1
        }
        guard ok else { throw CipherError.failed }
        return output
    }

    static func open(_ ciphertext: [UInt8], tag: [UInt8], key: [UInt8], nonce: [UInt8]) throws -> [UInt8] {
        guard let context = EVP_CIPHER_CTX_new() else { throw CipherError.failed }
        defer { EVP_CIPHER_CTX_free(context) }
        guard EVP_DecryptInit_ex(context, EVP_aes_256_gcm(), nil, key, nonce) == 1 else { throw CipherError.failed }
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count)
        var written: Int32 = 0
        let ok = plaintext.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard ciphertext.isEmpty || EVP_DecryptUpdate(context, buffer.baseAddress, &written, ciphertext, Int32(ciphertext.count)) == 1
            else { return false }
            var expected = tag
            guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(AESGCMCipher.tagSize), &expected) == 1 else { return false }
            var final: Int32 = 0
            // The tag is checked here: a changed byte anywhere fails.
            return EVP_DecryptFinal_ex(context, buffer.baseAddress.map { $0 + Int(written) }, &final) == 1
        }
        guard ok else { throw CipherError.notSealed }
        return plaintext
    }
}
#endif
