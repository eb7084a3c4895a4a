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
    /// The store was closed.
    case closed
    /// The stored data is encrypted and the store was opened without a cipher.
    case encrypted

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
        case .closed: return "The store is closed."
        case .encrypted: return "The stored data is encrypted: open the store with its key."
        }
    }
}

import OutpostCore
