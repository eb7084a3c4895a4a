import Foundation
import OutpostCore
import OutpostSQLite

/// What opening a store does when its database is gone but a store existed.
public enum LostDatabasePolicy: Sendable, Equatable {
    /// Refuse with ``StoreError/databaseLost(path:clientID:)``: the app says
    /// so plainly and can offer a restore.
    case refuse
    /// Begin a new, empty store under a new client id (the old one's seqs
    /// are never handed out again).
    case startOver
}

/// A small file beside the database that says a store existed here, and
/// under which client id. A database truncated to 0 bytes or deleted
/// would otherwise open as a brand-new empty store, losing every unsent
/// change without a word.
struct StoreMarker {
    let path: String

    init(databasePath: String) { path = databasePath + ".outpost-id" }

    var clientID: UUID? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return UUID.fromWire(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Written once, when the store is made; a failure to write it (a full
    /// disk) only loses this early warning, never data.
    func record(_ clientID: UUID) {
        guard self.clientID != clientID else { return }
        try? DurableFiles.write(Data((clientID.wireText + "\n").utf8), to: path)
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }

    /// Throws when the database is missing or empty where a store existed.
    func check(databasePath: String, policy: LostDatabasePolicy) throws {
        guard let known = clientID else { return }
        let size = (try? FileManager.default.attributesOfItem(atPath: databasePath)[.size] as? Int) ?? nil
        guard size == nil || size == 0 else { return }
        switch policy {
        case .refuse:
            throw StoreError.databaseLost(path: databasePath, clientID: known)
        case .startOver:
            remove()
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: databasePath + suffix) }
        }
    }
}

extension StoreError {
    /// The store's words for a failure of the device's own storage.
    init?(storage error: SQLiteError) {
        switch error.code {
        case .full: self = .diskFull
        case .readOnly, .permission: self = .readOnly
        case .busy, .locked: self = .busy(error.message)
        case .ioError: self = .ioFailure(error.message)
        case .corrupt, .notADatabase: self = .ioFailure("the database file is damaged (\(error.message))")
        default: return nil
        }
    }
}

extension StoreError {
    /// A failure of the device's storage itself (full, failing, in use),
    /// as opposed to a refusal of the request.
    public var isStorageFault: Bool {
        switch self {
        case .diskFull, .readOnly, .busy, .ioFailure: return true
        default: return false
        }
    }
}

/// Runs store work and says a storage failure in the store's words.
func translatingStorageErrors<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as SQLiteError {
        throw StoreError(storage: error) ?? error
    }
}

extension StoreMigrator {
    /// Whether opening must write: a pending or unrecorded schema step, a
    /// missing table or index, a first cipher, records left "sending" by
    /// a process that died, or a collection table of the earlier shape. When nothing needs changing the store opens
    /// without a single write, so a full disk or a read-only filesystem can
    /// still show everything the device holds.
    ///
    /// `readOnly`: a store of the release before named steps, whose steps
    /// have all run, opens on a filesystem that cannot be written; it
    /// records them the next time it can.
    ///
    /// `resettingSending`: false while another process's push is on the
    /// wire, whose records are "sending" for a reason.
    static func needsWrite(
        _ connection: SQLiteConnection, collections: [CollectionDescriptor], payloads: PayloadCodec, readOnly: Bool = false,
        resettingSending: Bool = true
    ) throws -> Bool {
        guard try StoreMigrations.pending(connection).isEmpty else { return true }
        if try !readOnly && !StoreMigrations.isRecorded(connection) { return true }
        let keyValues = KeyValueTable(connection: connection)
        let marked = try keyValues.value(sealedKey) == "1"
        if marked && !payloads.seals { throw StoreError.encrypted }
        if payloads.seals && !marked { return true }
        guard try keyValues.contains(clientIDKey) else { return true }
        let objects = Set(try connection.query("SELECT name FROM sqlite_master") { $0.string(0) })
        for descriptor in collections {
            guard objects.contains(descriptor.name) else { return true }
            for field in descriptor.indexedFields {
                let present = objects.contains(RecordTable.fieldIndexName(collection: descriptor.name, field: field))
                if present == payloads.seals { return true }
            }
            let table = RecordTable(descriptor.name, connection)
            if try resettingSending && table.hasSending() { return true }
            // The earlier shapes, and a table whose uuid index a cut-off
            // download left out, still read correctly: a store that cannot
            // be written opens as it is.
            if !readOnly, !objects.contains(table.uuidIndexName) { return true }
            if try !readOnly && table.hasEarlierShape() { return true }
        }
        return false
    }
}
