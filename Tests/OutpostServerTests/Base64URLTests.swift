import Foundation
@testable import OutpostServer
import Testing

/// Tokens, JWTs and pull cursors all pass through these few lines.
@Suite("Base64url")
struct Base64URLTests {
    @Test func theStandardsVectorsWithoutPadding() {
        let vectors = ["": "", "f": "Zg", "fo": "Zm8", "foo": "Zm9v", "foob": "Zm9vYg", "fooba": "Zm9vYmE", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
            #expect(Base64URL.decode(encoded) == Array(plain.utf8))
        }
        // The two characters that differ from base64.
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        #expect(Base64URL.decode("-_8") == [0xFB, 0xFF])
    }

    @Test func everyLengthRoundTripsAndAgreesWithFoundation() {
        var random = SystemRandomNumberGenerator()
        for length in 0...70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            let encoded = Base64URL.encode(bytes)
            let foundation = Data(bytes).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(encoded == foundation, "length \(length)")
            #expect(Base64URL.decode(encoded) == bytes, "length \(length)")
        }
    }

    @Test func anythingElseIsRefused() {
        for text in ["Zm9vY", "Zm9v=", "Zm9vYg==", "Zm+v", "Zm/v", "Zm9 v", "Zé9v", "\u{0}Zm9"] {
            #expect(Base64URL.decode(text) == nil, "\(text.debugDescription)")
        }
    }
}
