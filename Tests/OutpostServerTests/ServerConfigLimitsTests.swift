import Foundation
@testable import OutpostServer
import OutpostTesting
import Testing

/// The database timeouts and connection limits in the configuration file,
/// with their defaults, and a clear error for values that cannot work.
@Suite("Configuration limits", .timeLimit(.minutes(1)))
struct ServerConfigLimitsTests {
    func load(_ json: String) throws -> ServerConfig {
        let directory = try TemporaryDirectory(prefix: "outpost-config")
        let path = directory.path("config.json")
        try Data(json.utf8).write(to: URL(fileURLWithPath: path))
        return try ServerConfig.load(path: path)
    }

    let collections = #""collections": [{"name": "notes", "fields": {"text": {"type": "text"}}}]"#

    @Test func defaultsAndFileSettings() throws {
        let defaults = try load("{\(collections)}")
        #expect(defaults.databaseTimeouts == DatabaseTimeouts())
        #expect(defaults.databaseTimeouts.lock == 5 && defaults.databaseTimeouts.statement == 15)
        #expect(defaults.connections == ConnectionLimits())
        #expect(defaults.connections.total == 16_384 && defaults.connections.perAddress == 256, "room for live streams")

        let set = try load(
            #"{\#(collections), "lock_timeout_seconds": 2.5, "statement_timeout_seconds": 30, "connection_limit": 2000, "connections_per_address": 300, "idle_timeout_seconds": 20}"#)
        #expect(set.databaseTimeouts == (try DatabaseTimeouts(lock: 2.5, statement: 30)))
        #expect(set.connections == (try ConnectionLimits(total: 2000, perAddress: 300, idleTimeoutSeconds: 20)))

        #expect(defaults.maxBlobBytes == 50 * 1_048_576 && defaults.blobGrace == 7 * 86_400)
        let blobs = try load(#"{\#(collections), "max_blob_mib": 200, "blob_grace_days": 1.5}"#)
        #expect(blobs.maxBlobBytes == 200 * 1_048_576 && blobs.blobGrace == 1.5 * 86_400)
    }

    @Test func impossibleValuesAreRefused() throws {
        for bad in [
            #""lock_timeout_seconds": 0"#, #""lock_timeout_seconds": 20"#, #""statement_timeout_seconds": -1"#,
            #""connection_limit": 0"#, #""connections_per_address": 20000"#, #""idle_timeout_seconds": 0"#,
            #""heartbeat_seconds": 0"#, #""max_stream_seconds": 5"#,
            #""max_blob_mib": 0"#, #""max_blob_mib": 5000"#, #""blob_grace_days": 0"#,
        ] {
            #expect(throws: ConfigError.self, "\(bad)") { try load("{\(collections), \(bad)}") }
        }
    }
}

/// A key the configuration does not know stops the start with its name,
/// never a default served in silence.
@Suite("Configuration keys", .timeLimit(.minutes(1)))
struct ServerConfigKeysTests {
    let limits = ServerConfigLimitsTests()

    @Test func aMisspelledKeyIsRefusedNamingItAndTheKeyMeant() throws {
        let cases: [(json: String, says: String)] = [
            (#"{"tombstone_horizon_dayz": 30}"#, #"the key "tombstone_horizon_dayz", which Outpost does not know (did you mean "tombstone_horizon_days"?)"#),
            (#"{"jwt": {"jwks": "/k.json", "issuer": "i", "audience": "a", "role_claims": "r"}}"#, #""jwt" has the key "role_claims""#),
            (#"{"collections": [{"name": "notes", "fields": {"text": {"type": "text"}}, "read_onyl": true}]}"#, #"the collection 'notes' has the key "read_onyl""#),
            (#"{"collections": [{"name": "notes", "fields": {"text": {"type": "text", "requird": true}}}]}"#, #"field 'text' has the key "requird""#),
            (#"{"frobnicate": 1}"#, #"the key "frobnicate", which Outpost does not know; docs/operations.md"#),
        ]
        for (json, says) in cases {
            do {
                _ = try limits.load(json)
                Issue.record("accepted \(json)")
            } catch let error as ConfigError {
                #expect(error.description.contains(says), "\(error.description)")
            }
        }
    }

    /// No collections: the defaults alone; `conflict` is the policy's other spelling on any collection.
    @Test func collectionsAreOptionalAndConflictNamesThePolicy() throws {
        let bare = try limits.load(#"{"tombstone_horizon_days": 30}"#)
        #expect(bare.collections.keys.sorted() == (try ServerConfig()).collections.keys.sorted())
        let merged = try limits.load(#"{"collections": [{"name": "notes", "conflict": "merge_fields", "fields": {"text": {"type": "text"}}}]}"#)
        #expect(merged.collections["notes"]?.policy == .mergeFields)
        #expect(merged.collections["people"] != nil, "the defaults stay beside the file's collections")
    }
}
