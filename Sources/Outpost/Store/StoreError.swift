public import Foundation

/// What the local store refuses, in words an app can show or log.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The collection was not registered when the store was opened.
    case unknownCollection(String)
    /// The collection is reference data the device only reads.
    case readOnlyCollection(String)
    /// A collection or field name outside `[a-z][a-z0-9_]*` (they become SQL names).
    case invalidName(String)
    /// No record with this uuid in the collection (or it was deleted).
    case recordNotFound(collection: String, uuid: UUID)
    /// A create for a uuid that already exists.
    case recordExists(collection: String, uuid: UUID)
    /// Record data that is not a JSON object or does not fit the record type.
    case invalidRecord(String)
    /// A query the store cannot run: a key path that is not a stored
    /// property, or a field the record type does not have.
    case invalidQuery(String)
    /// The store was closed.
    case closed
    /// The stored data is encrypted and the store was opened without a cipher.
    case encrypted
    /// The device's disk is full: the write was not made; everything saved before is intact.
    case diskFull
    /// The database cannot be written (a read-only filesystem, or the store
    /// was opened read-only because it could not be written); reading works.
    case readOnly
    /// Another connection holds the database (an app extension, a backup): try again.
    case busy(String)
    /// The device's storage failed to read or write (an I/O error).
    case ioFailure(String)
    /// A stored row cannot be read: its table and key say which; nothing
    /// is made up in its place.
    case damagedRow(table: String, key: String, problem: String)
    /// The database file is missing or empty where a store existed (client
    /// `clientID`): its unsent changes are gone. Restore it from a backup,
    /// or open with `ifDatabaseLost: .startOver` to begin a new store.
    case databaseLost(path: String, clientID: UUID)
    /// A file given to ``LocalStore/attach(contentsOf:contentType:)`` could not be read; nothing was stored.
    case attachmentUnreadable(String)
    /// The attachment's bytes (this SHA-256) are not on this device, and no
    /// sync engine is connected to download them.
    case attachmentNotOnDevice(String)
    /// The attachment's file on this device no longer holds the bytes its hash names.
    case damagedAttachment(String)
    /// A setting given to open the store is out of range; nothing was opened.
    case invalidSetting(String)

    public var description: String {
        switch self {
        case .unknownCollection(let name): return "The collection '\(name)' is not registered with this store."
        case .readOnlyCollection(let name): return "The collection '\(name)' is read-only on this device."
        case .invalidName(let name):
            return "'\(name)' is not a valid name: use a lowercase letter, then letters, digits or _."
        case .recordNotFound(let collection, let uuid):
            return "No record \(uuid.wireText) in '\(collection)'."
        case .recordExists(let collection, let uuid):
            return "A record \(uuid.wireText) already exists in '\(collection)'."
        case .invalidRecord(let problem): return "The record is not valid: \(problem)."
        case .invalidQuery(let problem): return "The query cannot run: \(problem)."
        case .closed: return "The store is closed."
        case .encrypted: return "The stored data is encrypted: open the store with its key."
        case .diskFull: return "The device's storage is full: the change was not saved. Free some space and try again."
        case .readOnly: return "The device's storage cannot be written right now: records can be read, not changed."
        case .busy(let detail): return "The database is in use by another process (\(detail)); try again."
        case .ioFailure(let detail): return "The device's storage failed: \(detail)."
        case .damagedRow(let table, let key, let problem): return "A stored row of '\(table)' (\(key)) is damaged: \(problem)."
        case .databaseLost(let path, let clientID):
            return "The database at \(path) is missing or empty, but a store existed there (client \(clientID.wireText)); "
                + "its unsent changes are gone. Restore it from a backup, or start over with a new store."
        case .attachmentUnreadable(let detail): return "The file could not be attached: \(detail)."
        case .attachmentNotOnDevice(let sha):
            return "The attachment \(sha.prefix(12))… is not on this device; connect a sync engine to download it."
        case .damagedAttachment(let sha):
            return "The attachment \(sha.prefix(12))… on this device is damaged; it will be downloaded again."
        case .invalidSetting(let problem): return "The store cannot open with this setting: \(problem)."
        }
    }
}

import OutpostCore
