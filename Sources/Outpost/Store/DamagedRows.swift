import Foundation
import OutpostCore
import OutpostSQLite

/// Reads a stored row's fields strictly: a value that does not parse is a
/// `StoreError.damagedRow` naming the table and key, never a value made up
/// in its place (a random uuid would send a queued change for a record
/// that does not exist).
struct RowReader {
    let table: String
    let key: String

    func damaged(_ problem: String) -> StoreError { .damagedRow(table: table, key: key, problem: problem) }

    func uuid(_ text: String, _ what: String) throws -> UUID {
        guard let uuid = UUID.fromWire(text) else { throw damaged("\(what) '\(text.prefix(40))' is not a UUID") }
        return uuid
    }

    func op(_ text: String) throws -> MutationOp {
        guard let op = MutationOp(rawValue: text) else { throw damaged("operation '\(text.prefix(40))' is unknown") }
        return op
    }

    func object(_ text: String, _ what: String) throws -> JSONObject {
        do { return try JSONObject.parseObject(text) } catch { throw damaged("\(what) is not a JSON object (\(error))") }
    }

    /// `object` without building the value: for text used as it is.
    func checkObject(_ text: String, _ what: String) throws {
        do { try JSONObject.checkObject(text) } catch { throw damaged("\(what) is not a JSON object (\(error))") }
    }

    /// Runs a decoding step; a failure in it is this row's damage. A
    /// cipher that cannot open the payload is not: a wrong or missing key
    /// concerns the whole store and must fail the read, not empty the list.
    func reading<T>(_ what: String, _ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as CipherError {
            throw error
        } catch let error as StoreError {
            if case .damagedRow = error { throw error }
            throw damaged("\(what): \(error)")
        } catch { throw damaged("\(what): \(error)") }
    }
}

/// Damaged rows a reader met and stepped over, so one bad row never hides
/// every good one; the store reports them (``LocalStore/damagedRows()``).
final class DamageLog {
    private(set) var found: [String: StoreError] = [:]

    func record(_ error: StoreError) {
        if case .damagedRow(let table, let key, _) = error { found["\(table) \(key)"] = error }
    }

    func clear(_ table: String, _ key: String) { found["\(table) \(key)"] = nil }

    /// Forgets every damaged row (the store was wiped).
    func clearAll() { found.removeAll() }

    var all: [StoreError] { found.keys.sorted().compactMap { found[$0] } }

    /// Decodes a row, or logs its damage and yields nil.
    func tolerating<T>(_ decode: () throws -> T) throws -> T? {
        do { return try decode() } catch let error as StoreError {
            guard case .damagedRow = error else { throw error }
            record(error)
            return nil
        }
    }
}
