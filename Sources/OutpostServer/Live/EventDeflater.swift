#if canImport(CZlib)
import CZlib
#endif
import OutpostCore

/// A stream's piece deflated on its own: raw deflate (no header, no
/// trailer) started afresh and ended with a full flush, so it refers to
/// nothing before it and ends on a byte boundary. Such pieces can follow
/// one another, in any order, in any stream: one change's event is
/// deflated once and the same bytes go to every stream that sends it.
struct DeflatedSegment: Sendable, Equatable {
    /// The raw deflate blocks.
    let bytes: [UInt8]
    /// How many plain bytes they inflate to.
    let plainCount: Int
    /// The plain bytes' CRC-32 (gzip's trailer) and Adler-32 (zlib's).
    let crc: UInt32
    let adler: UInt32
}

/// zlib deflate states in raw mode, lent to one segment at a time: a
/// state is a quarter of a megabyte, so the streams that share events
/// share a few instead of holding one each.
enum EventDeflater {
    /// `plain` deflated as a segment at the stream level; nil where zlib is
    /// absent or fails (the stream then sends the bytes stored).
    static func segment(_ plain: [UInt8]) -> DeflatedSegment? {
        #if canImport(CZlib)
        guard let state = pool.withLock({ $0.popLast() }) ?? RawDeflateState(level: AnswerCompression.streamLevel) else { return nil }
        defer { pool.withLock { idle in if idle.count < keep { idle.append(state) } } }
        guard let bytes = plain.withUnsafeBytes({ state.segment($0) }) else { return nil }
        return DeflatedSegment(bytes: bytes, plainCount: plain.count, crc: Checksums.crc32(plain), adler: Checksums.adler32(plain))
        #else
        return nil
        #endif
    }

    #if canImport(CZlib)
    private static let pool = Locked<[RawDeflateState]>([])
    /// Kept past this, a state is freed: as many as segments deflated at once.
    private static let keep = 8
    #endif
}

/// One zlib deflate state without a wrapper (window bits -15): lent from
/// the pool for a segment, or a stream's own when it deflates its events
/// with their history (nil where zlib is absent).
final class RawDeflateState: @unchecked Sendable {
    // @unchecked Sendable: handed from the pool to one caller at a time, or held by one stream.
    #if canImport(CZlib)
    private var stream = z_stream()
    private var scratch = [UInt8](repeating: 0, count: 64 * 1024)
    #endif

    init?(level: Int32) {
        #if canImport(CZlib)
        guard deflateInit2_(&stream, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK
        else { return nil }
        #else
        return nil
        #endif
    }

    #if canImport(CZlib)
    deinit { deflateEnd(&stream) }

    /// `plain` from a fresh state, ended by a full flush.
    func segment(_ plain: UnsafeRawBufferPointer) -> [UInt8]? {
        guard deflateReset(&stream) == Z_OK else { return nil }
        return run(plain, flush: Z_FULL_FLUSH)
    }

    /// `plain` after everything this state deflated before (it may refer
    /// to it), ended by a sync flush: the client inflates all of it at once.
    func flushed(_ plain: [UInt8]) -> [UInt8]? {
        plain.withUnsafeBytes { run($0, flush: Z_SYNC_FLUSH) }
    }

    private func run(_ plain: UnsafeRawBufferPointer, flush: Int32) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(plain.count / 2 + 64)
        stream.next_in = UnsafeMutablePointer(mutating: plain.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(plain.count)
        defer { stream.next_in = nil }
        let room = scratch.count
        while true {
            let code = scratch.withUnsafeMutableBufferPointer { target in
                stream.next_out = target.baseAddress
                stream.avail_out = uInt(room)
                return deflate(&stream, flush)
            }
            guard code == Z_OK || code == Z_BUF_ERROR else { return nil }
            out.append(contentsOf: scratch[0..<(room - Int(stream.avail_out))])
            // Done once zlib leaves room in the output with all input taken.
            if stream.avail_out > 0 && stream.avail_in == 0 { return out }
        }
    }
    #else
    func flushed(_ plain: [UInt8]) -> [UInt8]? { nil }
    #endif
}

/// The two checksums the gzip and zlib trailers carry, and how a stream
/// extends its running one by a segment it did not checksum itself.
enum Checksums {
    static func crc32(_ bytes: [UInt8], after crc: UInt32 = 0) -> UInt32 {
        #if canImport(CZlib)
        bytes.withUnsafeBufferPointer { UInt32(CZlib.crc32(uLong(crc), $0.baseAddress, uInt($0.count))) }
        #else
        0
        #endif
    }

    static func adler32(_ bytes: [UInt8], after adler: UInt32 = 1) -> UInt32 {
        #if canImport(CZlib)
        bytes.withUnsafeBufferPointer { UInt32(CZlib.adler32(uLong(adler), $0.baseAddress, uInt($0.count))) }
        #else
        1
        #endif
    }

    /// The CRC-32 of A then B, from A's, B's and B's length.
    static func crc32(_ first: UInt32, then second: UInt32, length: Int) -> UInt32 {
        #if canImport(CZlib)
        UInt32(crc32_combine(uLong(first), uLong(second), .init(length)))
        #else
        0
        #endif
    }

    static func adler32(_ first: UInt32, then second: UInt32, length: Int) -> UInt32 {
        #if canImport(CZlib)
        UInt32(adler32_combine(uLong(first), uLong(second), .init(length)))
        #else
        1
        #endif
    }
}
