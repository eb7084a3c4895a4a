import Foundation

/// Facts about a database's schema (which indexes exist) that a layer above
/// reads once and keeps on its connection instead of asking `sqlite_schema`
/// before every write. They hold while `PRAGMA schema_version` stays where
/// it was when they were read: any schema change, this connection's or
/// another process's, moves it.
package struct SchemaFacts {
    /// The schema version the facts were read at; nil before any.
    private var version: Int64?
    private var facts: [String: Bool] = [:]

    package init() {}

    /// The fact noted under `key`, if the schema is still at `version`.
    package func fact(_ key: String, at version: Int64) -> Bool? {
        version == self.version ? facts[key] : nil
    }

    /// Notes a fact read at `version`; facts of another version go.
    package mutating func note(_ key: String, _ value: Bool, at version: Int64) {
        if version != self.version {
            facts = [:]
            self.version = version
        }
        facts[key] = value
    }

    /// A rollback can take back a schema change whose version the facts
    /// were read at, and a later change can reach that number again.
    package mutating func forget() {
        facts = [:]
        version = nil
    }
}
