package import Foundation

#if canImport(CZlib)
import CZlib
#endif

/// Request bodies sent compressed (`Content-Encoding: deflate`, the zlib
/// format), for pushes: a batch of 500 changes is about 220 kB of JSON and
/// 42 kB deflated. Fewer bytes on a mobile link, and on Linux a body that
/// fits one write: URLSession there keeps polling a socket for
/// writability, from the last write of a body larger than 64 kB until the
/// answer comes, a core's worth of work while the server thinks
/// (docs/benchmarks.md).
///
/// Available where zlib is linked (Linux). Elsewhere `deflate` answers nil
/// and bodies go as they are; a server built without it refuses encoded
/// bodies with 415 and the client sends them plain.
package enum BodyCompression {
    /// The codings a server reads (`Accept-Encoding` on its answers).
    package static var acceptedEncodings: [String] { isAvailable ? ["deflate", "gzip"] : [] }

    package static var isAvailable: Bool {
        #if canImport(CZlib)
        return true
        #else
        return false
        #endif
    }

    /// Why an encoded body could not be read.
    package enum Failure: Error, Equatable {
        /// Not a deflate (zlib) or gzip stream, or cut short.
        case broken
        /// It inflates to more than the limit (a small body that would fill memory).
        case tooLarge
    }

    /// `data` in the zlib format, at zlib's fastest level (the time it
    /// takes is the device's, in the push's path); nil where zlib is absent.
    package static func deflate(_ data: Data) -> Data? {
        #if canImport(CZlib)
        var bound = compressBound(uLong(data.count))
        var out = Data(count: Int(bound))
        let code = out.withUnsafeMutableBytes { target in
            data.withUnsafeBytes { source in
                compress2(
                    target.baseAddress!.assumingMemoryBound(to: Bytef.self), &bound,
                    source.baseAddress?.assumingMemoryBound(to: Bytef.self), uLong(data.count), 1)
            }
        }
        guard code == Z_OK else { return nil }
        out.count = Int(bound)
        return out
        #else
        return nil
        #endif
    }

    /// Inflates a zlib or gzip stream, refusing one that would exceed
    /// `limit` bytes before it has written them.
    package static func inflate(_ data: Data, limit: Int) throws(Failure) -> Data {
        #if canImport(CZlib)
        var stream = z_stream()
        // 15 window bits, +32: the zlib or the gzip header, whichever it is.
        guard inflateInit2_(&stream, 15 + 32, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { throw .broken }
        defer { inflateEnd(&stream) }
        var out = Data()
        let chunk = 64 * 1024
        var buffer = [UInt8](repeating: 0, count: chunk)
        var overLimit = false
        let outcome: Int32 = data.withUnsafeBytes { source in
            stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress?.assumingMemoryBound(to: Bytef.self))
            stream.avail_in = uInt(source.count)
            var code = Z_OK
            while code == Z_OK {
                code = buffer.withUnsafeMutableBufferPointer { target in
                    stream.next_out = target.baseAddress
                    stream.avail_out = uInt(chunk)
                    return CZlib.inflate(&stream, Z_NO_FLUSH)
                }
                let produced = chunk - Int(stream.avail_out)
                guard out.count + produced <= limit else {
                    overLimit = true
                    return Z_DATA_ERROR
                }
                out.append(contentsOf: buffer[0..<produced])
                // No progress with input left: the stream is cut short.
                if code == Z_BUF_ERROR || (code == Z_OK && produced == 0 && stream.avail_in == 0) { return Z_DATA_ERROR }
            }
            return code
        }
        if overLimit { throw .tooLarge }
        // Anything after the stream's end is not part of it: refused too.
        guard outcome == Z_STREAM_END, stream.avail_in == 0 else { throw .broken }
        return out
        #else
        throw .broken
        #endif
    }
}
