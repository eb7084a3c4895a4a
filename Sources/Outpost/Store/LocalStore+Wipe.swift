import Foundation
import OutpostCore
import OutpostSQLite

extension LocalStore {
    /// Empties the store where it stands: every record, queued change,
    /// conflict, catalog, attachment file and sync cursor is deleted, the freed pages are
    /// zeroed and the file rebuilt, and the store takes a new client id.
    ///
    /// The handle stays open and usable: screens observing it see empty
    /// lists, and the next person to sign in starts from nothing. This is
    /// the wipe ``SyncEngine/signOut(unsentChanges:)`` makes, so an app
    /// never holds a closed store after a sign-out. Callers warn about
    /// unsent changes first; `signOut` does.
    ///
    /// A new client id because the old one's sequence numbers are known to
    /// the server: starting them again under the same id would make the
    /// next person's first changes look like repeats of the last one's.
    public func wipe() throws {
        try checkOpen()
        if isReadOnly { throw StoreError.readOnly }
        let newID = ids.next()
        try translatingStorageErrors {
            // Deleted pages are overwritten with zeros, not left in the file.
            try connection.execute("PRAGMA secure_delete = ON")
            try connection.transaction {
                let tables = try connection.query(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                ) { $0.string(0) }
                // Which schema steps ran is a property of the file, like its tables.
                for table in tables where table != StoreMigrations.table {
                    if table == "kv" {
                        // Whether payloads are sealed is a property of the file, not of the person.
                        try keyValues.removeAll(except: StoreMigrator.sealedKey)
                    } else {
                        try connection.execute("DELETE FROM \"\(table)\"")
                    }
                }
                try keyValues.insert(StoreMigrator.clientIDKey, newID.wireText)
            }
            // Rebuild the file and empty the WAL: nothing of the old data
            // stays in free pages or in the log.
            try connection.execute("VACUUM")
            try connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
        // The attachments' files go with their rows (the table was emptied above).
        try translatingStorageErrors { try attachments.folder.removeAll() }
        attachments.attachedHere = []
        identity.withLock { $0 = newID }
        StoreMarker(databasePath: path).record(newID)
        outbox.leases = []
        releasePushLockIfIdle()
        captureLimits = nil
        liveCounts = LiveCounts()
        tables.damage.clearAll()
        notify(Set(registry.all.map(\.name)).union([StoreObserver.conflictsKey]))
    }

    /// Closes the store and removes the database with its WAL, SHM and push lock files
    /// and the attachments' folder
    /// (deleting the account from the device). Later calls on this handle
    /// throw ``StoreError/closed``; to sign out and go on, use ``wipe()``.
    public func destroy() throws {
        close()
        StoreMarker(databasePath: path).remove()
        try attachments.folder.removeAll()
        for suffix in ["", "-wal", "-shm", "-journal", ".outpost-push"] {
            let file = path + suffix
            if FileManager.default.fileExists(atPath: file) {
                try FileManager.default.removeItem(atPath: file)
            }
        }
    }
}
