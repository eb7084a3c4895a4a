import Foundation
import OutpostCore
import OutpostSQLite

/// The power-loss model of the files Outpost keeps beside its databases
/// (attachments' bytes, a server's blobs): after `losePower()` a folder
/// holds exactly what a disk would hold after a power loss.
///
/// It hears every sync made through ``DurableFiles`` under its folder: a
/// file's bytes are kept as they were at its last sync, a folder's names as
/// they were at its last sync. On a power loss every name that was never
/// synced into its folder is gone (with everything under it), and every
/// file that remains holds the bytes of its last sync — none if it was
/// never synced. A file deleted is taken as gone for good (the model never
/// brings one back).
final class VolatileFiles: DurableFilesObserver, @unchecked Sendable {
    // @unchecked Sendable: the maps are read and written under `lock`.
    let root: String
    private let lock = NSLock()
    /// Each file's bytes at its last sync, by path.
    private var syncedBytes: [String: Data] = [:]
    /// Each folder's names at its last sync, by path.
    private var syncedNames: [String: Set<String>] = [:]

    /// Starts watching `root` (made if missing): what it holds now is on the disk.
    init(root: String) throws {
        self.root = (root as NSString).standardizingPath
        try FileManager.default.createDirectory(atPath: self.root, withIntermediateDirectories: true)
        syncAll()
        DurableFiles.observe(self.root, self)
    }

    /// Everything the folder holds now is on the disk (a restore that
    /// copied files and synced them all).
    func syncAll() {
        lock.lock()
        defer { lock.unlock() }
        syncedBytes.removeAll()
        syncedNames.removeAll()
        walk(root) { path, isDirectory in
            if isDirectory {
                self.syncedNames[path] = Set(Self.names(path))
            } else {
                self.syncedBytes[path] = FileManager.default.contents(atPath: path) ?? Data()
            }
        }
        syncedNames[root] = Set(Self.names(root))
    }

    func stop() { DurableFiles.stopObserving(root) }

    func synced(file path: String) {
        let bytes = FileManager.default.contents(atPath: path) ?? Data()
        lock.withLock { syncedBytes[path] = bytes }
    }

    func synced(directory path: String) {
        let names = Set(Self.names(path))
        lock.withLock { syncedNames[path] = names }
    }

    func renamed(from source: String, to destination: String) {
        // The file (its bytes on the disk) moves; its new name waits for the folder's sync.
        lock.withLock { syncedBytes[destination] = syncedBytes.removeValue(forKey: source) }
    }

    /// What a disk holds after a power loss now.
    func losePower() {
        lock.lock()
        defer { lock.unlock() }
        prune(root)
    }

    private func prune(_ folder: String) {
        let kept = syncedNames[folder] ?? []
        for name in Self.names(folder) {
            let path = folder + "/" + name
            guard kept.contains(name) else {
                try? FileManager.default.removeItem(atPath: path)
                syncedBytes[path] = nil
                continue
            }
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
            if isDirectory.boolValue {
                prune(path)
            } else {
                let bytes = syncedBytes[path] ?? Data()
                if FileManager.default.contents(atPath: path) != bytes {
                    _ = FileManager.default.createFile(atPath: path, contents: bytes)
                }
            }
        }
    }

    private func walk(_ folder: String, _ body: (String, Bool) -> Void) {
        for name in Self.names(folder) {
            let path = folder + "/" + name
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
            body(path, isDirectory.boolValue)
            if isDirectory.boolValue { walk(path, body) }
        }
    }

    private static func names(_ folder: String) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
    }
}
