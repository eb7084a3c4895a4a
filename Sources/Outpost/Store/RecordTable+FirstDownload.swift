import Foundation
import OutpostCore
import OutpostSQLite

/// The collections a download is filling with no uuid index: an empty table
/// at a page with more to come, whose uuids arrive in no key order, has its
/// index dropped, its rows appended, and the index built from them in one
/// go with the last page. Putting ~235,000 uuids made elsewhere (UUIDv4)
/// into the index one by one, each at a random place, cost more CPU and
/// writes than sorting them once.
struct FirstDownloadKeys {
    /// By collection: the rows the download appended, while its index is off.
    private var appended: [String: AppendedRows] = [:]

    /// The collections of `pages` to fill with no index now, with their
    /// rows so far. A table written by anything else meanwhile has its index
    /// again (`RecordTable.ensureUuidIndex`) and goes the usual way.
    mutating func begin(
        _ pages: [RawPullPage], registered: Set<String>, hasMore: Bool, on connection: SQLiteConnection
    ) throws -> [String: AppendedRows] {
        var collections: Set<String> = []
        for page in pages {
            var previous = ""
            for change in page.changes where change.collection != previous {
                previous = change.collection
                collections.insert(previous)
            }
        }
        var filling: [String: AppendedRows] = [:]
        for collection in collections where registered.contains(collection) {
            let table = RecordTable(collection, connection)
            let indexed = try table.hasUuidIndex()
            if !indexed, let rows = appended[collection] {
                filling[collection] = rows
                continue
            }
            appended[collection] = nil
            // Uuids in key order go into the index at its end, which costs
            // less than sorting them all again at the end.
            if hasMore, try table.isEmpty(), !Self.keysAscend(in: pages, of: collection) {
                try table.dropUuidIndex()
                let rows = AppendedRows()
                appended[collection] = rows
                filling[collection] = rows
            } else if !indexed {
                try table.ensureUuidIndex()
            }
        }
        return filling
    }

    /// With the last page, in its transaction: every index put off is built.
    mutating func finish(on connection: SQLiteConnection) throws {
        for (collection, rows) in appended.sorted(by: { $0.key < $1.key }) {
            // Freed before SQLite's sort takes its memory: the peak stays that of the download.
            rows.removeAll()
            try RecordTable(collection, connection).ensureUuidIndex()
        }
        appended = [:]
    }

    /// Whether some collection's uuid index is off now.
    var isFilling: Bool { !appended.isEmpty }

    /// A transaction that failed took its rows back: what is known of them
    /// goes, and the next page builds the index (or puts it off again while
    /// the table is still empty).
    mutating func forget() { appended = [:] }

    /// Whether a collection's uuids in these pages come in key order (at
    /// most one in eight lower than the one before: a few records made
    /// elsewhere among time-ordered keys still do).
    static func keysAscend(in pages: [RawPullPage], of collection: String) -> Bool {
        var pairs = 0
        var descending = 0
        for page in pages {
            page.withText { text in
                var previous: UnsafeBufferPointer<UInt8>?
                for change in page.changes where change.collection == collection {
                    let uuid = text.span(change.uuid)
                    if let before = previous {
                        pairs += 1
                        if uuid.lexicographicallyPrecedes(before) { descending += 1 }
                    }
                    previous = uuid
                }
            }
        }
        return descending * 8 <= pairs
    }
}

/// Rowids of the rows a first download appended, by uuid: a record that
/// comes again in a later page (changed meanwhile) is found here rather than
/// by reading a table with no index.
final class AppendedRows {
    /// Uuids in the protocol's spelling, as their 16 bytes: no String per record.
    private var packed: [PackedKey: Int64] = [:]
    private var other: [String: Int64] = [:]
    /// The rowid of the last row appended; an empty table numbers from 1.
    var lastRowid: Int64 = 0

    var count: Int { packed.count + other.count }

    /// The row of a uuid appended before; for a new one, nil, and `rowid`
    /// (the one its insert will get) noted for it: one look-up a record.
    func claim(_ uuid: UnsafeBufferPointer<UInt8>, as rowid: Int64) -> Int64? {
        if let key = PackedKey(uuid) {
            guard let before = packed.updateValue(rowid, forKey: key) else { return nil }
            packed[key] = before
            return before
        }
        let text = String(decoding: uuid, as: UTF8.self)
        guard let before = other.updateValue(rowid, forKey: text) else { return nil }
        other[text] = before
        return before
    }

    func rowid(_ uuid: UnsafeBufferPointer<UInt8>) -> Int64? {
        if let key = PackedKey(uuid) { return packed[key] }
        return other[String(decoding: uuid, as: UTF8.self)]
    }

    func set(_ uuid: UnsafeBufferPointer<UInt8>, _ rowid: Int64) {
        if let key = PackedKey(uuid) { packed[key] = rowid } else { other[String(decoding: uuid, as: UTF8.self)] = rowid }
    }

    func removeAll() {
        packed = [:]
        other = [:]
    }

    func remove(_ uuid: UnsafeBufferPointer<UInt8>) {
        if let key = PackedKey(uuid) { packed[key] = nil } else { other[String(decoding: uuid, as: UTF8.self)] = nil }
    }

    /// The 128 bits of a uuid written as 36 characters of lowercase hex and
    /// dashes; nil for any other text (kept as a String instead).
    struct PackedKey: Hashable {
        var high: UInt64 = 0
        var low: UInt64 = 0

        init?(_ text: UnsafeBufferPointer<UInt8>) {
            let dash = UInt8(ascii: "-")
            guard text.count == 36, text[8] == dash, text[13] == dash, text[18] == dash, text[23] == dash else { return nil }
            var invalid: UInt8 = 0
            for range in [0..<8, 9..<13, 14..<18] { Self.read(text, range, into: &high, &invalid) }
            for range in [19..<23, 24..<36] { Self.read(text, range, into: &low, &invalid) }
            if invalid != 0 { return nil }
        }

        @inline(__always)
        private static func read(_ text: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, into value: inout UInt64, _ invalid: inout UInt8) {
            for index in range {
                let nibble = hexValues[Int(text[index])]
                invalid |= nibble & 0xF0
                value = value << 4 | UInt64(nibble & 0x0F)
            }
        }

        /// Each byte's value as a lowercase hex digit; 0xF0 for any other byte.
        private static let hexValues: [UInt8] = (0..<256).map { byte in
            switch byte {
            case 0x30...0x39: UInt8(byte - 0x30)
            case 0x61...0x66: UInt8(byte - 0x61 + 10)
            default: 0xF0
            }
        }
    }
}
