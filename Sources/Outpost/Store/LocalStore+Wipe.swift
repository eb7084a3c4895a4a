import Foundation

extension LocalStore {
    /// Closes the store and removes the database with its WAL and SHM files
    /// (the wipe on logout or revocation). Callers warn about unsent
    /// changes first; `SyncEngine.signOut(unsentChanges:)` does.
    public func destroy() throws {
        close()
        StoreMarker(databasePath: path).remove()
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let file = path + suffix
            if FileManager.default.fileExists(atPath: file) {
                try FileManager.default.removeItem(atPath: file)
            }
        }
    }
}
