package import Foundation

#if canImport(CZlib)
import CZlib
#endif

/// The two content codings built on zlib's deflate: `gzip` (RFC 1952) and
/// `deflate` (the zlib format, RFC 1950), which is what HTTP means by it.
package enum DeflateFormat: String, Sendable, CaseIterable {
    case gzip
    case deflate

    #if canImport(CZlib)
    /// zlib's window bits for the format: 15, plus 16 for the gzip wrapper.
    var windowBits: Int32 { self == .gzip ? 15 + 16 : 15 }
    #endif
}

/// One zlib deflate state: a live stream's events, flushed after each one
/// (whole answers go through libdeflate on the server); raw deflate blocks
/// with no wrapper, for event pieces the server deflates once and sends on
/// many streams; `compress` makes the gzip-6 floor the benchmarks and tests
/// measure answers against.
///
/// Not thread-safe: one body (or one stream) at a time.
package final class DeflateStream: @unchecked Sendable {
    // @unchecked Sendable: used by one owner at a time (a stream, a measurement).
    /// nil: raw deflate blocks, no header and no trailer.
    package let format: DeflateFormat?
    package let level: Int32
    #if canImport(CZlib)
    private var stream = z_stream()
    #endif
    private var ready = false
    /// Where output is produced before it is appended to the caller's bytes.
    private var scratch = [UInt8](repeating: 0, count: 64 * 1024)

    /// nil where zlib is absent or refuses the settings.
    package convenience init?(format: DeflateFormat, level: Int32) {
        self.init(wrapper: format, level: level)
    }

    /// Raw deflate blocks (zlib's window bits -15): what a caller wraps in a
    /// header and trailer of its own. nil where zlib is absent.
    package convenience init?(rawBlocksAt level: Int32) {
        self.init(wrapper: nil, level: level)
    }

    private init?(wrapper format: DeflateFormat?, level: Int32) {
        self.format = format
        self.level = level
        #if canImport(CZlib)
        guard
            deflateInit2_(
                &stream, level, Z_DEFLATED, format?.windowBits ?? -15, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                Int32(MemoryLayout<z_stream>.size)) == Z_OK
        else { return nil }
        ready = true
        #else
        return nil
        #endif
    }

    deinit {
        #if canImport(CZlib)
        if ready { deflateEnd(&stream) }
        #endif
    }

    /// `body` compressed whole, as one answer: the state starts afresh.
    package func compress(_ body: UnsafeRawBufferPointer) -> [UInt8] {
        #if canImport(CZlib)
        deflateReset(&stream)
        var out: [UInt8] = []
        out.reserveCapacity(body.count / 6 + 64)
        run(body, flush: Z_FINISH, into: &out)
        return out
        #else
        return []
        #endif
    }

    /// Appends `piece` to a stream under way and flushes it (a sync flush):
    /// everything given so far can be inflated from the bytes appended.
    /// False when zlib failed (the bytes appended are then unusable).
    @discardableResult
    package func flushed(_ piece: UnsafeRawBufferPointer, into out: inout [UInt8]) -> Bool {
        #if canImport(CZlib)
        return run(piece, flush: Z_SYNC_FLUSH, into: &out)
        #else
        return false
        #endif
    }

    /// `piece` deflated from a fresh state and ended by a full flush: it
    /// refers to nothing before it and ends on a byte boundary, so the same
    /// bytes can follow anything in any stream. nil where zlib fails.
    package func segment(_ piece: UnsafeRawBufferPointer) -> [UInt8]? {
        #if canImport(CZlib)
        guard deflateReset(&stream) == Z_OK else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(piece.count / 2 + 64)
        return run(piece, flush: Z_FULL_FLUSH, into: &out) ? out : nil
        #else
        return nil
        #endif
    }

    /// Ends a stream under way: its last bytes and the format's trailer.
    package func finish(into out: inout [UInt8]) {
        #if canImport(CZlib)
        run(UnsafeRawBufferPointer(start: nil, count: 0), flush: Z_FINISH, into: &out)
        #endif
    }

    #if canImport(CZlib)
    /// False when zlib reported an error.
    @discardableResult
    private func run(_ input: UnsafeRawBufferPointer, flush: Int32, into out: inout [UInt8]) -> Bool {
        stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(input.count)
        defer { stream.next_in = nil }
        let room = scratch.count
        while true {
            let code = scratch.withUnsafeMutableBufferPointer { target in
                stream.next_out = target.baseAddress
                stream.avail_out = uInt(room)
                return CZlib.deflate(&stream, flush)
            }
            let produced = room - Int(stream.avail_out)
            out.append(contentsOf: scratch[0..<produced])
            if code == Z_STREAM_END { return true }
            // Z_BUF_ERROR: no progress was possible, which a flush with no input left may meet.
            guard code == Z_OK || code == Z_BUF_ERROR else { return false }
            if code == Z_BUF_ERROR && produced == 0 { return stream.avail_in == 0 }
            // Done when zlib left room in the output: it had nothing more to give.
            if stream.avail_out > 0 && stream.avail_in == 0 { return true }
        }
    }
    #endif
}

/// Inflates a gzip or zlib stream piece by piece as it arrives (a stream's
/// events, read as each is flushed).
package final class InflateStream {
    #if canImport(CZlib)
    private var stream = z_stream()
    #endif
    private var scratch = [UInt8](repeating: 0, count: 64 * 1024)
    /// The stream's end was read.
    package private(set) var ended = false

    /// nil where zlib is absent.
    package init?() {
        #if canImport(CZlib)
        // 15 window bits, +32: the zlib or the gzip header, whichever it is.
        guard inflateInit2_(&stream, 15 + 32, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return nil }
        #else
        return nil
        #endif
    }

    deinit {
        #if canImport(CZlib)
        inflateEnd(&stream)
        #endif
    }

    /// What `piece` inflates to, given everything before it.
    package func inflate(_ piece: Data) throws(BodyCompression.Failure) -> Data {
        #if canImport(CZlib)
        guard !piece.isEmpty else { return Data() }
        guard !ended else { throw .broken }
        var out = Data()
        let room = scratch.count
        let failed: Bool = piece.withUnsafeBytes { source in
            stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress?.assumingMemoryBound(to: Bytef.self))
            stream.avail_in = uInt(source.count)
            while true {
                let code = scratch.withUnsafeMutableBufferPointer { target in
                    stream.next_out = target.baseAddress
                    stream.avail_out = uInt(room)
                    return CZlib.inflate(&stream, Z_NO_FLUSH)
                }
                out.append(contentsOf: scratch[0..<(room - Int(stream.avail_out))])
                if code == Z_STREAM_END {
                    ended = true
                    return stream.avail_in != 0
                }
                // Z_BUF_ERROR: no progress possible until more input comes.
                if code == Z_BUF_ERROR || (code == Z_OK && stream.avail_in == 0 && stream.avail_out > 0) { return false }
                if code != Z_OK { return true }
            }
        }
        stream.next_in = nil
        if failed { throw .broken }
        return out
        #else
        throw .broken
        #endif
    }
}
