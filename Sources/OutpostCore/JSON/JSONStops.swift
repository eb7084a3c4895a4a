/// Finds the next byte a JSON walk must look at, eight bytes at a time: a
/// record's payload is mostly plain text between quotes, and the byte loop
/// spent a compare and a branch on each of its bytes.
///
/// Each test marks a byte with its high bit; only the lowest mark of a word
/// is exact (a borrow may mark bytes above a true match), which is the
/// only one used.
enum JSONStops {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highs: UInt64 = 0x8080_8080_8080_8080

    /// Bytes below `limit` (at most 0x80).
    @inline(__always) private static func below(_ word: UInt64, _ limit: UInt8) -> UInt64 {
        (word &- ones &* UInt64(limit)) & ~word & highs
    }

    @inline(__always) private static func equal(_ word: UInt64, _ byte: UInt8) -> UInt64 {
        below(word ^ (ones &* UInt64(byte)), 1)
    }

    @inline(__always) private static func word(_ base: UnsafePointer<UInt8>, _ position: Int) -> UInt64 {
        UInt64(littleEndian: UnsafeRawPointer(base + position).loadUnaligned(as: UInt64.self))
    }

    /// Inside a string: a quote, a backslash or a control character.
    @inline(__always) static func isStringStop(_ byte: UInt8) -> Bool {
        byte == 0x22 || byte == 0x5C || byte < 0x20
    }

    /// Between strings: a quote or a bracket of either kind.
    @inline(__always) static func isStructureStop(_ byte: UInt8) -> Bool {
        byte == 0x22 || byte | 0x20 == 0x7B || byte | 0x20 == 0x7D
    }

    /// The position of the first string stop at or after `position`, or `count`.
    @inline(__always) static func nextInString(_ base: UnsafePointer<UInt8>, from position: Int, count: Int) -> Int {
        var position = position
        while position + 8 <= count {
            let bytes = word(base, position)
            let marks = equal(bytes, 0x22) | equal(bytes, 0x5C) | below(bytes, 0x20)
            if marks != 0 { return position + marks.trailingZeroBitCount >> 3 }
            position += 8
        }
        while position < count, !isStringStop(base[position]) { position += 1 }
        return min(position, count)
    }

    /// The position of the first quote or bracket at or after `position`, or `count`.
    @inline(__always) static func nextInStructure(_ base: UnsafePointer<UInt8>, from position: Int, count: Int) -> Int {
        var position = position
        while position + 8 <= count {
            let bytes = word(base, position)
            // '[' and ']' are '{' and '}' less 0x20: one test each for both kinds.
            let folded = bytes | ones &* 0x20
            let marks = equal(bytes, 0x22) | equal(folded, 0x7B) | equal(folded, 0x7D)
            if marks != 0 { return position + marks.trailingZeroBitCount >> 3 }
            position += 8
        }
        while position < count, !isStructureStop(base[position]) { position += 1 }
        return min(position, count)
    }
}
