import Foundation

/// Cheap checks on a request body before JSON decoding: valid UTF-8 and a
/// bounded nesting depth, so hostile input gets a 400, never a crash or a
/// deep recursion in the decoder.
enum RequestGuard {
    static let maxDepth = 32

    /// The bytes as text if they are valid UTF-8: the standard library's
    /// check where the OS has it (macOS 15), Foundation's before.
    static func utf8Text(_ bytes: some Collection<UInt8>) -> String? {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            return String(validating: bytes, as: UTF8.self)
        }
        return String(bytes: bytes, encoding: .utf8)
    }

    static func check(_ body: Data) throws {
        guard utf8Text(body) != nil else {
            throw APIError(.invalidJSON, "The request body is not valid UTF-8.")
        }
        // Over the bytes in place: iterating `Data` costs a call per byte.
        try body.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            var depth = 0
            var inString = false
            var escaped = false
            for byte in bytes {
                if inString {
                    if escaped {
                        escaped = false
                    } else if byte == UInt8(ascii: "\\") {
                        escaped = true
                    } else if byte == UInt8(ascii: "\"") {
                        inString = false
                    }
                    continue
                }
                switch byte {
                case UInt8(ascii: "\""): inString = true
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                    if depth > maxDepth {
                        throw APIError(.invalidRequest, "The request body is nested more than \(maxDepth) levels deep.")
                    }
                case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
                default: break
                }
            }
        }
    }
}
