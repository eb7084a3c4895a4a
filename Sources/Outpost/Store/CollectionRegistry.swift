import Foundation

/// The collections a store was opened with.
struct CollectionRegistry: Sendable {
    private var descriptors: [String: CollectionDescriptor] = [:]
    /// Collections the device may only read (reference data).
    private var readOnly: Set<String> = ["catalogs"]

    init(_ list: [CollectionDescriptor]) throws {
        for descriptor in list {
            guard CollectionSchemaName.isValid(descriptor.name), !StoreMigrations.fixedTables.contains(descriptor.name)
            else { throw StoreError.invalidName(descriptor.name) }
            for field in descriptor.indexedFields + Array(descriptor.references.keys)
            where !CollectionSchemaName.isValid(field) {
                throw StoreError.invalidName(field)
            }
            descriptors[descriptor.name] = descriptor
        }
    }

    var all: [CollectionDescriptor] { descriptors.values.sorted { $0.name < $1.name } }

    func descriptor(_ name: String) throws -> CollectionDescriptor {
        guard let descriptor = descriptors[name] else {
            if readOnly.contains(name) { throw StoreError.readOnlyCollection(name) }
            throw StoreError.unknownCollection(name)
        }
        return descriptor
    }
}

import OutpostCore

/// Collection and field names become SQL identifiers and JSON paths.
enum CollectionSchemaName {
    static func isValid(_ name: String) -> Bool { CollectionSchema.isValidName(name) }
}
