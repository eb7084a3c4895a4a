import OutpostCore

/// How one compressed stream goes on the wire: the format's header, then
/// its pieces, then an empty last block and the trailer.
///
/// A stream whose events are shared (a team's, or everyone's: a commit
/// wakes many streams with the same page) keeps no deflate state of its
/// own, only the running checksum and length its trailer needs: each
/// event's deflated bytes are made once for every stream, and its own
/// pieces (cursors, heartbeats, errors: a hundred bytes or so) go stored.
///
/// A stream of one user's own records shares its events with that user's
/// other devices at most, so it deflates them itself with their history:
/// a one-record event then costs about a quarter of its bytes alone.
struct StreamEncoding: Sendable {
    let format: DeflateFormat
    private var crc: UInt32 = 0
    private var adler: UInt32 = 1
    /// Plain bytes sent so far.
    private var length = 0
    private(set) var finished = false
    /// The stream's own deflate state, when it deflates with history;
    /// everything it sends then goes through it.
    private var history: DeflateStream?

    init(format: DeflateFormat, withHistory: Bool = false) {
        self.format = format
        history = withHistory ? DeflateStream(rawBlocksAt: AnswerCompression.streamLevel) : nil
    }

    /// Whether the stream deflates its pieces itself, with their history.
    var keepsHistory: Bool { history != nil }

    /// What the stream begins with: gzip's ten bytes (no name, no time,
    /// Unix) or zlib's two (a 32 KB window, default level).
    var header: [UInt8] {
        switch format {
        case .gzip: [0x1F, 0x8B, 0x08, 0, 0, 0, 0, 0, 0, 0x03]
        case .deflate: [0x78, 0x9C]
        }
    }

    /// Appends a piece of the stream's own: deflated with the history when
    /// the stream keeps one, else stored.
    mutating func appendOwn(_ plain: [UInt8], to out: inout [UInt8]) {
        guard let history else { return appendStored(plain, to: &out) }
        var bytes: [UInt8] = []
        guard plain.withUnsafeBytes({ history.flushed($0, into: &bytes) }) else {
            // zlib failed: from here on stored, which refers to nothing.
            self.history = nil
            return appendStored(plain, to: &out)
        }
        out += bytes
        crc = Checksums.crc32(plain, after: crc)
        adler = Checksums.adler32(plain, after: adler)
        length &+= plain.count
    }

    /// Appends a segment deflated elsewhere (a stream without history only:
    /// its history would not hold the segment's bytes).
    mutating func append(_ segment: DeflatedSegment, to out: inout [UInt8]) {
        precondition(history == nil, "a stream deflating with history takes no segment made elsewhere")
        out += segment.bytes
        crc = Checksums.crc32(crc, then: segment.crc, length: segment.plainCount)
        adler = Checksums.adler32(adler, then: segment.adler, length: segment.plainCount)
        length &+= segment.plainCount
    }

    /// Appends `plain` as stored blocks. Each block begins on a byte
    /// boundary, as every segment ends on one.
    private mutating func appendStored(_ plain: [UInt8], to out: inout [UInt8]) {
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
