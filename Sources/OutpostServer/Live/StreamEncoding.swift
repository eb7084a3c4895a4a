import OutpostCore

/// How one compressed stream goes on the wire: the format's header, then
/// segments (each event's shared deflate bytes, or the stream's own small
/// pieces as stored blocks), then an empty last block and the trailer.
///
/// The stream keeps no deflate state of its own, only the running
/// checksum and length its trailer needs: what it sends is either made
/// once for every stream or not compressed at all (heartbeats, cursors and
/// errors are a hundred bytes or so).
struct StreamEncoding: Sendable {
    let format: DeflateFormat
    private var crc: UInt32 = 0
    private var adler: UInt32 = 1
    /// Plain bytes sent so far.
    private var length = 0
    private(set) var finished = false

    init(format: DeflateFormat) { self.format = format }

    /// What the stream begins with: gzip's ten bytes (no name, no time,
    /// Unix) or zlib's two (a 32 KB window, default level).
    var header: [UInt8] {
        switch format {
        case .gzip: [0x1F, 0x8B, 0x08, 0, 0, 0, 0, 0, 0, 0x03]
        case .deflate: [0x78, 0x9C]
        }
    }

    /// Appends a segment deflated elsewhere.
    mutating func append(_ segment: DeflatedSegment, to out: inout [UInt8]) {
        out += segment.bytes
        crc = Checksums.crc32(crc, then: segment.crc, length: segment.plainCount)
        adler = Checksums.adler32(adler, then: segment.adler, length: segment.plainCount)
        length &+= segment.plainCount
    }

    /// Appends `plain` as stored blocks: no deflating for the stream's own
    /// short pieces. Each block begins on a byte boundary, as every segment
    /// ends on one.
    mutating func appendStored(_ plain: [UInt8], to out: inout [UInt8]) {
        var start = 0
        while start < plain.count {
            let count = min(0xFFFF, plain.count - start)
            let size = UInt16(count)
            // Not last, type 00 (stored), padded to the byte; then LEN and its complement.
            out += [0, UInt8(size & 0xFF), UInt8(size >> 8), UInt8(~size & 0xFF), UInt8(~size >> 8)]
            out += plain[start..<(start + count)]
            start += count
        }
        crc = Checksums.crc32(plain, after: crc)
        adler = Checksums.adler32(plain, after: adler)
        length &+= plain.count
    }

    /// Ends the stream: an empty last block (fixed codes) and the trailer.
    mutating func finish(to out: inout [UInt8]) {
        guard !finished else { return }
        finished = true
        out += [0x03, 0x00]
        switch format {
        case .gzip:
            let size = UInt32(truncatingIfNeeded: length)
            for value in [crc, size] { out += [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 24)] }
        case .deflate:
            out += [UInt8(adler >> 24), UInt8(adler >> 16 & 0xFF), UInt8(adler >> 8 & 0xFF), UInt8(adler & 0xFF)]
        }
    }
}
