import Foundation
import OutpostCore

/// Housekeeping: tombstones past the horizon and push results past their
/// retention are removed. Cursors older than the newest purged version then
/// get 410, because the deletions they would need are gone.
///
/// Blobs no live record names are removed once untouched for the grace
/// period: a photo whose record was deleted, or an upload nobody finished.
/// One still uploading, or named by a live record, is never removed.
struct Maintenance {
    let database: any ServerDatabase
    let config: ServerConfig
    let clock: any WallClock
    var blobs: BlobStore?

    /// The newest tombstone past the horizon. `+version`: without it SQLite
    /// answers MAX by walking every record down the version index (under the
    /// write lock, 60 ms per 235,000 records) instead of reading the few
    /// tombstones in their own index.
    static let newestPurgeableQuery = "SELECT MAX(+version) FROM records WHERE deleted = 1 AND updated_at < ?"

    func run() throws {
        let now = clock.now()
        let horizon = ServerTimestamp(now - config.tombstoneHorizon).rawValue
        let retention = ServerTimestamp(now - config.resultRetention).rawValue
        try database.write { sql in
            let newest = try sql.first(Self.newestPurgeableQuery, [.text(horizon)])?.optionalInt(0)
            let newestExit = try sql.first("SELECT MAX(version) FROM scope_exits WHERE at < ?", [.text(horizon)])?
                .optionalInt(0)
            if let purged = [newest, newestExit].compactMap({ $0 }).max() {
                // A purged record's history goes with it: nothing is left to show it on.
                // Driven from the tombstones, not from every history row.
                try sql.execute(
                    """
                    DELETE FROM record_history WHERE (collection, uuid) IN (
                        SELECT collection, uuid FROM records WHERE deleted = 1 AND updated_at < ?)
                    """, [.text(horizon)])
                try sql.execute("DELETE FROM records WHERE deleted = 1 AND updated_at < ?", [.text(horizon)])
                try sql.execute("DELETE FROM scope_exits WHERE at < ?", [.text(horizon)])
                let previous = try sql.first("SELECT value FROM server_state WHERE key = 'purged_through'").flatMap {
                    Int64($0.string(0))
                } ?? 0
                try sql.execute(
                    "UPDATE server_state SET value = ? WHERE key = 'purged_through'",
                    [.text(String(max(previous, purged)))])
            }
            // Results go after their retention, but the id each seq was used
            // for stays as long as tombstones do: it is what tells a retry
            // from a restored device reusing the seq (an emptied result).
            let idMap = ServerTimestamp(now - max(config.tombstoneHorizon, config.resultRetention)).rawValue
            if try SchemaState.oldestServer(sql) >= ServerSchema.slimResultsStep {
                // Slim results hold no record: each is kept whole until its
                // id goes, and nothing is emptied (which rewrote every row).
                try ResultsByAge.delete(olderThan: idMap, in: sql)
            } else {
                try sql.execute("DELETE FROM mutation_results WHERE created_at < ?", [.text(idMap)])
                try sql.execute(
                    "UPDATE mutation_results SET result = '' WHERE created_at < ? AND result <> ''", [.text(retention)])
            }
            try sql.execute("DELETE FROM push_problems WHERE at < ?", [.text(retention)])
            try sql.execute("DELETE FROM admin_sessions WHERE expires_at < ?", [.text(ServerTimestamp(now).rawValue)])
        }
        guard let blobs else { return }
        let grace = ServerTimestamp(now - config.blobGrace).rawValue
        let unreferenced = try database.read { sql in
            try sql.query(
                """
                SELECT sha256 FROM blobs WHERE COALESCE(touched_at, created_at) < ?
                AND NOT EXISTS (SELECT 1 FROM blob_refs WHERE blob_refs.sha256 = blobs.sha256) LIMIT 10000
                """, [.text(grace)]
            ).map { $0.string(0) }
        }
        for sha in unreferenced { try blobs.drop(sha) }
    }
}
