import Foundation
import OutpostSQLite

/// How the store writes and reads payloads (record fields, queued changes,
/// conflict reports): JSON text, or sealed by the app's `PayloadCipher` and
/// kept as a BLOB. Text found in a store that now seals (written before
/// the cipher was set) is still read.
struct PayloadCodec: Sendable {
    let cipher: (any PayloadCipher)?

    var seals: Bool { cipher != nil }

    /// The value to store for a payload's JSON text.
    func stored(_ text: String?) throws -> SQLiteValue {
        guard let text else { return .null }
        guard let cipher else { return .text(text) }
        return .blob(Data(try cipher.seal(Array(text.utf8))))
    }

    /// A payload's JSON text from a result column.
    func text(_ row: SQLiteRow, _ column: Int) throws -> String? {
        switch row.value(column) {
        case .null: return nil
        case .text(let text): return text
        case .blob(let sealed):
            guard let cipher else { throw StoreError.encrypted }
            return String(decoding: try cipher.open([UInt8](sealed)), as: UTF8.self)
        case .integer(let number): return String(number)
        case .real(let number): return String(number)
        }
    }
}
