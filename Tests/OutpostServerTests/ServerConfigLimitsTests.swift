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
