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
        guard let state = pool.withLock({ $0.popLast() }) ?? DeflateStream(rawBlocksAt: AnswerCompression.streamLevel) else { return nil }
        defer { pool.withLock { idle in if idle.count < keep { idle.append(state) } } }
        guard let bytes = plain.withUnsafeBytes({ state.segment($0) }) else { return nil }
        return DeflatedSegment(bytes: bytes, plainCount: plain.count, crc: Checksums.crc32(plain), adler: Checksums.adler32(plain))
    }

    private static let pool = Locked<[DeflateStream]>([])
    /// Kept past this, a state is freed: as many as segments deflated at once.
    private static let keep = 8
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
