public import Foundation

/// A server time as the server wrote it: RFC 3339 UTC with microseconds.
///
/// Clients keep it as opaque text and send it back byte for byte; it is never
/// re-formatted through the device clock (docs/protocol.md, "Basics"). Ordering compares
/// the text, which is correct for the server's fixed-width format.
public struct ServerTimestamp: RawRepresentable, Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard Self.parse(text) != nil else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "must be an RFC 3339 UTC time such as 2026-11-29T10:00:00.123456Z")
        }
        rawValue = text
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { rawValue }

    /// The instant, for display only ("data updated on 3 Aug at 09:42").
    public var date: Date? { Self.parse(rawValue) }

    /// The server's format for an instant: `2026-11-29T10:00:00.123456Z`.
    public init(_ date: Date) {
        // Nearest, not down: a time read from this text (a Double) and
        // written again must give the same text.
        let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        let seconds = micros >= 0 ? micros / 1_000_000 : (micros - 999_999) / 1_000_000
        let fraction = micros - seconds * 1_000_000
        let civil = CivilTime(epochSeconds: seconds)
        // Digits written by hand: String(format:) shows in every local write's profile.
        var bytes = [UInt8](repeating: 0, count: 27)
        func put(_ value: Int, _ width: Int, at offset: Int) {
            var value = value
            for position in stride(from: offset + width - 1, through: offset, by: -1) {
                bytes[position] = UInt8(48 + value % 10)
                value /= 10
            }
        }
        put(civil.year, 4, at: 0)
        bytes[4] = 45
        put(civil.month, 2, at: 5)
        bytes[7] = 45
        put(civil.day, 2, at: 8)
        bytes[10] = 84
        put(civil.hour, 2, at: 11)
        bytes[13] = 58
        put(civil.minute, 2, at: 14)
        bytes[16] = 58
        put(civil.second, 2, at: 17)
        bytes[19] = 46
        put(Int(fraction), 6, at: 20)
        bytes[26] = 90
        rawValue = String(decoding: bytes, as: UTF8.self)
    }

    /// Accepts RFC 3339 with `Z` or an offset and 0-9 fraction digits.
    static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20 else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for index in range {
                let byte = bytes[index]
                guard byte >= 48 && byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
        guard let year = number(0..<4), bytes[4] == 45, let month = number(5..<7), bytes[7] == 45,
            let day = number(8..<10), bytes[10] == 84 || bytes[10] == 116, let hour = number(11..<13),
            bytes[13] == 58, let minute = number(14..<16), bytes[16] == 58, let second = number(17..<19),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var index = 19
        var fraction = 0.0
        if index < bytes.count, bytes[index] == 46 {
            index += 1
            // Digits as one integer, divided once: adding 0.1, 0.01, … would
            // carry a float error into the microseconds.
            var digits = 0
            var scale = 1.0
            let start = index
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57, index - start < 9 {
                digits = digits * 10 + Int(bytes[index] - 48)
                scale *= 10
                index += 1
            }
            guard index > start, index == bytes.count || bytes[index] < 48 || bytes[index] > 57 else { return nil }
            fraction = Double(digits) / scale
        }
        guard index < bytes.count else { return nil }
        var offsetSeconds = 0
        if bytes[index] == 90 || bytes[index] == 122 {
            index += 1
        } else if bytes[index] == 43 || bytes[index] == 45, index + 6 == bytes.count, bytes[index + 3] == 58,
            let offsetHours = number(index + 1..<index + 3), let offsetMinutes = number(index + 4..<index + 6)
        {
            offsetSeconds = (offsetHours * 3600 + offsetMinutes * 60) * (bytes[index] == 43 ? 1 : -1)
            index += 6
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }
        let days = CivilTime.daysFromCivil(year: year, month: month, day: day)
        let seconds = Double(days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds)
        return Date(timeIntervalSince1970: seconds + fraction)
    }
}

/// Proleptic Gregorian calendar arithmetic in UTC, without Calendar or
/// DateFormatter (both slow and locale-dependent).
struct CivilTime {
    var year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int

    init(epochSeconds: Int64) {
        var days = Int(epochSeconds / 86_400)
        var rest = Int(epochSeconds % 86_400)
        if rest < 0 {
            rest += 86_400
            days -= 1
        }
        hour = rest / 3600
        minute = rest % 3600 / 60
        second = rest % 60
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        day = doy - (153 * mp + 2) / 5 + 1
        month = mp < 10 ? mp + 3 : mp - 9
        year = yoe + era * 400 + (month <= 2 ? 1 : 0)
    }

    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = month > 2 ? month - 3 : month + 9
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
