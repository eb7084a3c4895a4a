package import Foundation

#if canImport(CLibDeflate)
import CLibDeflate
#endif

/// Whole compressed answers (`Content-Encoding: gzip` or `deflate`) decoded
/// in one call with libdeflate, on the thread that waits for the answer
/// rather than the transport's: a download's pages are inflated side by
/// side, at about twice zlib's speed (zlib also checks the CRC byte by
/// byte as it goes). Streams keep zlib's piecewise `InflateStream`.
///
/// Available where libdeflate is linked (Linux); elsewhere the platform's
/// HTTP stack decodes answers itself and `isAvailable` is false.
package enum AnswerInflater {
    package static var isAvailable: Bool {
        #if canImport(CLibDeflate)
        return true
        #else
        return false
        #endif
    }

    /// `body` decoded from the codings of a `Content-Encoding` header
    /// (applied in the order listed, so undone last first). A body that
    /// does not decode is `.broken`; one that would exceed `limit` bytes is
    /// refused as `.tooLarge` before that much memory is taken.
    package static func decode(_ body: Data, codings: String, limit: Int) throws(BodyCompression.Failure) -> Data {
        var decoded = body
        let names = codings.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        for name in names.reversed() where !name.isEmpty && name != "identity" {
            switch name {
            case "gzip", "x-gzip": decoded = try gunzip(decoded, limit: limit)
            case "deflate": decoded = try inflate(decoded, limit: limit)
            default: throw .broken
            }
        }
        return decoded
    }

    /// A gzip member: its trailer gives the size (modulo 4 GiB), so the
    /// output is allocated once at its size and never grows.
    package static func gunzip(_ body: Data, limit: Int) throws(BodyCompression.Failure) -> Data {
        #if canImport(CLibDeflate)
        if body.isEmpty { return body }
        // A 10-byte header, at least one block byte, the 8-byte trailer.
        guard body.count >= 19, body[body.startIndex] == 0x1F, body[body.startIndex + 1] == 0x8B else { throw .broken }
        // A trailer over the bound is refused unread (a body cut short or
        // followed by other bytes may be refused so too, as too large).
        let size = body.withUnsafeBytes { Int(UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: $0.count - 4, as: UInt32.self))) }
        guard size <= limit else { throw .tooLarge }
        return try run(body, capacity: size) { decompressor, input, output, read, written in
            libdeflate_gzip_decompress_ex(
                decompressor, input.baseAddress, input.count, output.baseAddress, output.count, read, written)
        }
        #else
        throw .broken
        #endif
    }

    /// `deflate` as HTTP means it (the zlib format), or bare deflate blocks
    /// from a server that sends those: no size is given, so the output
    /// grows fourfold from eight times the input until it fits or meets `limit`.
    package static func inflate(_ body: Data, limit: Int) throws(BodyCompression.Failure) -> Data {
        #if canImport(CLibDeflate)
        if body.isEmpty { return body }
        let zlibHeader = body.count >= 2 && body.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            bytes[0] & 0x0F == 8 && (Int(bytes[0]) << 8 | Int(bytes[1])) % 31 == 0
        }
        var capacity = min(limit, max(64 * 1024, body.count * 8))
        while true {
            do {
                return try run(body, capacity: capacity) { decompressor, input, output, read, written in
                    zlibHeader
                        ? libdeflate_zlib_decompress_ex(
                            decompressor, input.baseAddress, input.count, output.baseAddress, output.count, read, written)
                        : libdeflate_deflate_decompress_ex(
                            decompressor, input.baseAddress, input.count, output.baseAddress, output.count, read, written)
                }
            } catch .tooLarge where capacity < limit {
                capacity = capacity > limit / 4 ? limit : capacity * 4
            }
        }
        #else
        throw .broken
        #endif
    }

    #if canImport(CLibDeflate)
    /// One decompression into a buffer of `capacity` bytes: `.tooLarge`
    /// when the output does not fit, `.broken` when the data is bad or
    /// followed by bytes that are not part of it.
    private static func run(
        _ body: Data, capacity: Int,
        _ decompress: (
            OpaquePointer, UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer, UnsafeMutablePointer<Int>,
            UnsafeMutablePointer<Int>
        ) -> libdeflate_result
    ) throws(BodyCompression.Failure) -> Data {
        guard let decompressor = libdeflate_alloc_decompressor() else { throw .broken }
        defer { libdeflate_free_decompressor(decompressor) }
        // Uninitialised memory handed to the Data without a copy: the
        // decoder writes every byte the answer keeps.
        guard let memory = malloc(max(capacity, 1)) else { throw .tooLarge }
        var read = 0
        var written = 0
        let result = body.withUnsafeBytes { input in
            decompress(
                decompressor, input, UnsafeMutableRawBufferPointer(start: memory, count: capacity), &read, &written)
        }
        guard result == LIBDEFLATE_SUCCESS, read == body.count else {
            free(memory)
            throw result == LIBDEFLATE_INSUFFICIENT_SPACE ? .tooLarge : .broken
        }
        guard written > 0 else {
            free(memory)
            return Data()
        }
        // A buffer much larger than its content gives the rest back.
        let kept = written < capacity / 2 ? realloc(memory, written) ?? memory : memory
        return Data(bytesNoCopy: kept, count: written, deallocator: .free)
    }
    #endif
}
