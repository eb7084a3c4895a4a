import Foundation

/// Rowids of the rows a first download appended, by uuid: a record that
/// comes again in a later page (changed meanwhile) is found here rather than
/// by reading a table with no index.
final class AppendedRows {
    /// Uuids in the protocol's spelling, as their 16 bytes: no String per record.
    private var packed = UuidRowids()
    private var other: [String: Int64] = [:]
    /// The rowid of the last row appended; an empty table numbers from 1.
    var lastRowid: Int64 = 0

    var count: Int { packed.count + other.count }

    /// The row of a uuid appended before; for a new one, nil, and `rowid`
    /// (the one its insert will get) noted for it: one look-up a record.
    func claim(_ uuid: UnsafeBufferPointer<UInt8>, as rowid: Int64) -> Int64? {
        if let key = PackedKey(uuid) { return packed.claim(key, as: rowid) }
        let text = String(decoding: uuid, as: UTF8.self)
        guard let before = other.updateValue(rowid, forKey: text) else { return nil }
        other[text] = before
        return before
    }

    func rowid(_ uuid: UnsafeBufferPointer<UInt8>) -> Int64? {
        if let key = PackedKey(uuid) { return packed.rowid(key) }
        return other[String(decoding: uuid, as: UTF8.self)]
    }

    func set(_ uuid: UnsafeBufferPointer<UInt8>, _ rowid: Int64) {
        if let key = PackedKey(uuid) { packed.set(key, rowid) } else { other[String(decoding: uuid, as: UTF8.self)] = rowid }
    }

    func removeAll() {
        packed = UuidRowids()
        other = [:]
    }

    func remove(_ uuid: UnsafeBufferPointer<UInt8>) {
        if let key = PackedKey(uuid) { packed.remove(key) } else { other[String(decoding: uuid, as: UTF8.self)] = nil }
    }

    /// The 128 bits of a uuid written as 36 characters of lowercase hex and
    /// dashes; nil for any other text (kept as a String instead).
    struct PackedKey: Hashable {
        var high: UInt64 = 0
        var low: UInt64 = 0

        init(high: UInt64, low: UInt64) {
            self.high = high
            self.low = low
        }

        init?(_ text: UnsafeBufferPointer<UInt8>) {
            guard text.count == 36, let base = text.baseAddress else { return nil }
            let dash = UInt8(ascii: "-")
            guard base[8] == dash, base[13] == dash, base[18] == dash, base[23] == dash else { return nil }
            var invalid: UInt8 = 0
            Self.read(base, 0, 8, into: &high, &invalid)
            Self.read(base, 9, 13, into: &high, &invalid)
            Self.read(base, 14, 18, into: &high, &invalid)
            Self.read(base, 19, 23, into: &low, &invalid)
            Self.read(base, 24, 36, into: &low, &invalid)
            if invalid != 0 { return nil }
        }

        @inline(__always)
        private static func read(
            _ text: UnsafePointer<UInt8>, _ start: Int, _ end: Int, into value: inout UInt64, _ invalid: inout UInt8
        ) {
            hexValues.withUnsafeBufferPointer { table in
                for index in start..<end {
                    let nibble = table[Int(text[index])]
                    invalid |= nibble & 0xF0
                    value = value << 4 | UInt64(nibble & 0x0F)
                }
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

/// Rowids by 16-byte uuid in one open-addressed table. The uuids are random
/// bits already, so a few multiplications spread them as well as Swift's
/// SipHash does, for less; the seed (per table) keeps uuids chosen to
/// collide from lining up. Entries are 24 bytes, kept at most 5/8 full.
final class UuidRowids {
    private struct Slot {
        var high: UInt64
        var low: UInt64
        /// 0 for an empty slot (SQLite numbers appended rows from 1), -1 for a removed uuid.
        var rowid: Int64
    }

    private var slots = UnsafeMutableBufferPointer<Slot>(start: nil, count: 0)
    private(set) var count = 0
    /// Occupied slots, removed uuids included (they keep their place in the probe sequence).
    private var used = 0
    private let seed = UInt64.random(in: .min ... .max)

    static let empty: Int64 = 0
    static let removed: Int64 = -1

    deinit { slots.deallocate() }

    @inline(__always)
    private static func hash(_ key: AppendedRows.PackedKey, _ seed: UInt64) -> Int {
        // Every bit of both halves reaches the low bits the index takes.
        var mixed = (key.high ^ seed) &* 0x9E37_79B9_7F4A_7C15 ^ key.low
        mixed ^= mixed >> 32
        mixed &*= 0xBF58_476D_1CE4_E5B9
        mixed ^= mixed >> 29
        return Int(truncatingIfNeeded: mixed)
    }

    /// The slot holding `key`, or the empty one where it would go.
    @inline(__always)
    private static func find(_ key: AppendedRows.PackedKey, in slots: UnsafeMutableBufferPointer<Slot>, _ seed: UInt64) -> Int {
        let mask = slots.count - 1
        var index = hash(key, seed) & mask
        while true {
            let slot = slots[index]
            if slot.rowid == empty || (slot.high == key.high && slot.low == key.low) { return index }
            index = (index + 1) & mask
        }
    }

    private static func isHeld(_ rowid: Int64) -> Bool { rowid != empty && rowid != removed }

    /// The rowid noted for `key`, or nil with `rowid` noted for it.
    func claim(_ key: AppendedRows.PackedKey, as rowid: Int64) -> Int64? {
        reserveOne()
        let index = Self.find(key, in: slots, seed)
        let before = slots[index].rowid
        if Self.isHeld(before) { return before }
        if before == Self.empty { used += 1 }
        count += 1
        slots[index] = Slot(high: key.high, low: key.low, rowid: rowid)
        return nil
    }

    func rowid(_ key: AppendedRows.PackedKey) -> Int64? {
        guard slots.count > 0 else { return nil }
        let rowid = slots[Self.find(key, in: slots, seed)].rowid
        return Self.isHeld(rowid) ? rowid : nil
    }

    func set(_ key: AppendedRows.PackedKey, _ rowid: Int64) {
        if claim(key, as: rowid) == nil { return }
        slots[Self.find(key, in: slots, seed)].rowid = rowid
    }

    func remove(_ key: AppendedRows.PackedKey) {
        guard slots.count > 0 else { return }
        let index = Self.find(key, in: slots, seed)
        guard Self.isHeld(slots[index].rowid) else { return }
        slots[index].rowid = Self.removed
        count -= 1
    }

    /// Room for one more entry: the table doubles past 5/8 full.
    private func reserveOne() {
        guard (used + 1) * 8 > slots.count * 5 else { return }
        let old = slots
        slots = .allocate(capacity: max(1024, old.count * 2))
        slots.initialize(repeating: Slot(high: 0, low: 0, rowid: Self.empty))
        used = 0
        count = 0
        for slot in old where Self.isHeld(slot.rowid) {
            slots[Self.find(AppendedRows.PackedKey(high: slot.high, low: slot.low), in: slots, seed)] = slot
            used += 1
            count += 1
        }
        old.deallocate()
    }
}
