import Foundation
import OutpostCore

/// The keys a configuration file may hold, checked before it is read: a
/// misspelled key (`tombstone_horizon_dayz`) was ignored and its default
/// silently served; now the start stops and names it, with the key meant.
/// The known keys are the decoders' own coding keys, so a key a decoder
/// reads is never refused here.
enum ConfigKeys {
    /// Throws a `ConfigError` naming the first key no part of the file knows;
    /// `topLevel` and `jwt` are the file's and its `jwt` object's keys.
    static func check(_ document: JSONValue, topLevel: Set<String>, jwt: Set<String>) throws {
        guard let top = document.objectValue else { throw ConfigError("the configuration must be a JSON object") }
        try refuseUnknown(top, known: topLevel, in: "the configuration")
        if let object = top["jwt"]?.objectValue { try refuseUnknown(object, known: jwt, in: "\"jwt\"") }
        if case .array(let entries)? = top["collections"] {
            for entry in entries {
                guard let collection = entry.objectValue else { continue }
                let name = collection["name"]?.stringValue.map { "the collection '\($0)'" } ?? "a collection"
                let known = collection["table"] == nil ? CollectionSchema.configurationKeys : TableMapping.configurationKeys
                try refuseUnknown(collection, known: known, in: name)
                for (fieldName, field) in collection["fields"]?.objectValue ?? [:] {
                    guard let field = field.objectValue else { continue }
                    try refuseUnknown(field, known: FieldSchema.configurationKeys, in: "\(name)'s field '\(fieldName)'")
                }
            }
        }
    }

    private static func refuseUnknown(_ object: JSONObject, known: Set<String>, in place: String) throws {
        for key in object.keys.sorted() where !known.contains(key) {
            let meant = closest(to: key, among: known).map { " (did you mean \"\($0)\"?)" } ?? ""
            throw ConfigError(
                "\(place) has the key \"\(key)\", which Outpost does not know\(meant); docs/operations.md lists every key")
        }
    }

    /// The known key a few letters away from `key`, if one is.
    static func closest(to key: String, among known: Set<String>) -> String? {
        var best: (key: String, edits: Int)?
        for candidate in known.sorted() {
            let edits = distance(Array(key.utf8), Array(candidate.utf8))
            if edits < (best?.edits ?? Int.max) { best = (candidate, edits) }
        }
        guard let best, best.edits <= max(2, key.utf8.count / 4) else { return nil }
        return best.key
    }

    /// Edits (insert, delete, replace) from `a` to `b`.
    private static func distance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        var previous = Array(0...b.count)
        for (i, left) in a.enumerated() {
            var current = [i + 1] + Array(repeating: 0, count: b.count)
            for (j, right) in b.enumerated() {
                current[j + 1] = min(previous[j + 1] + 1, current[j] + 1, previous[j] + (left == right ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
