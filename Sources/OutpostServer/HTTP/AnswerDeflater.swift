import CLibDeflate
package import OutpostCore

/// One libdeflate compressor at one level: a whole body in one call, gzip
/// or zlib format. Several times zlib's speed at zlib level 6's ratio,
/// which matters because the server compresses every page of a first
/// download on the same cores the device may be storing it with.
///
/// Not thread-safe: one body at a time (`AnswerCompression` pools them).
package final class AnswerDeflater: @unchecked Sendable {
    // @unchecked Sendable: used by one owner at a time, handed over through the pool's lock.
    package let level: Int32
    private let compressor: OpaquePointer
    /// Output written here, then copied out at its exact size: bodies
    /// compress about tenfold, and an array sized to the worst case would
    /// keep the rest allocated for as long as the answer is held.
    private var scratch: [UInt8] = []
    /// A scratch buffer past this is freed after use rather than kept in the pool.
    private static let keptScratch = 1 << 20

    /// libdeflate's levels run 1 to 12; nil outside them or without memory.
    package init?(level: Int32) {
        guard (1...12).contains(level), let compressor = libdeflate_alloc_compressor(level) else { return nil }
        self.level = level
        self.compressor = compressor
    }

    deinit { libdeflate_free_compressor(compressor) }

    /// `body` compressed whole in `format`; nil only if libdeflate fails,
    /// which its worst-case bound rules out.
    package func compress(_ body: UnsafeRawBufferPointer, as format: DeflateFormat) -> [UInt8]? {
        let bound =
            switch format {
            case .gzip: libdeflate_gzip_compress_bound(compressor, body.count)
            case .deflate: libdeflate_zlib_compress_bound(compressor, body.count)
            }
        if scratch.count < bound { scratch = [UInt8](repeating: 0, count: bound) }
        defer { if scratch.count > Self.keptScratch { scratch = [] } }
        let written = scratch.withUnsafeMutableBytes { out in
            switch format {
            case .gzip: libdeflate_gzip_compress(compressor, body.baseAddress, body.count, out.baseAddress, bound)
            case .deflate: libdeflate_zlib_compress(compressor, body.baseAddress, body.count, out.baseAddress, bound)
            }
        }
        guard written > 0 else { return nil }
        return Array(scratch[0..<written])
    }

    /// `body` compressed whole in `format`.
    package func compress(_ body: [UInt8], as format: DeflateFormat) -> [UInt8]? {
        body.withUnsafeBytes { compress($0, as: format) }
    }
}

/// libdeflate compressors for answers, handed to one answer at a time. One
/// compressor writes either format, so the pool keeps a single list.
final class AnswerDeflaterPool: Sendable {
    private let level: Int32
    private let idle = Locked<[AnswerDeflater]>([])
    /// Kept past this, a compressor is freed instead.
    private let keep = 16

    init(level: Int32) { self.level = level }

    func take() -> AnswerDeflater? {
        idle.withLock { $0.popLast() } ?? AnswerDeflater(level: level)
    }

    func give(_ deflater: AnswerDeflater) {
        idle.withLock { idle in
            if idle.count < keep { idle.append(deflater) }
        }
    }
}
