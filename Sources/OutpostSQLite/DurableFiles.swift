public import Foundation
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The one way Outpost makes a file it wrote survive a power loss: the
/// files beside its databases (attachments' bytes, a server's blobs, a
/// profile's sign-in, a store's marker).
///
/// A write reaches the operating system's cache, not the disk; a power loss
/// keeps only what was synced. A new or renamed file also needs its folder
/// synced, or its name may be gone after the loss while the bytes are safe.
/// On Apple platforms `fsync` only reaches the drive's own cache, so these
/// use `F_FULLFSYNC`, which reaches the medium.
///
/// Every sync goes through here, so a test can watch them: an installed
/// ``DurableFilesObserver`` hears of each one, and the power-loss model of
/// the tests and the simulation keeps exactly what was synced.
public enum DurableFiles {
    /// Syncs an open file's bytes to stable storage.
    public static func sync(descriptor: Int32, path: String) throws {
        try retrying(path, "sync") { fullSync(descriptor) }
        observer(for: path)?.synced(file: path)
    }

    /// Syncs the file at `path` (opened for the purpose).
    public static func syncFile(atPath path: String) throws {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw error("open", path) }
        defer { close(descriptor) }
        try sync(descriptor: descriptor, path: path)
    }

    /// Syncs a folder: the names it holds (a file made or renamed in it) survive.
    public static func syncDirectory(_ path: String) throws {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY)
        guard descriptor >= 0 else { throw error("open", path) }
        defer { close(descriptor) }
        try retrying(path, "sync") { fullSync(descriptor) }
        observer(for: path)?.synced(directory: path)
    }

    /// Makes a folder (and the ones above it) whose existence survives.
    public static func createDirectory(_ path: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue { return }
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty, parent != path { try createDirectory(parent) }
        if mkdir(path, 0o700) != 0 && errno != EEXIST { throw error("create", path) }
        try syncDirectory(parent.isEmpty ? "." : parent)
    }

    /// Renames a file whose bytes were synced, then syncs the folder that
    /// now names it: after this returns, `destination` holds those bytes
    /// whatever happens to the power.
    public static func rename(_ source: String, to destination: String) throws {
        guard systemRename(source, destination) == 0 else { throw error("rename", source) }
        observer(for: destination)?.renamed(from: source, to: destination)
        try syncDirectory((destination as NSString).deletingLastPathComponent)
    }

    /// Replaces the file at `path` with `data` so that a power loss at any
    /// moment leaves either the old file whole or the new one whole: a
    /// temporary file beside it, synced, renamed over it, its folder synced.
    public static func write(_ data: Data, to path: String, permissions: UInt16 = 0o600) throws {
        let folder = (path as NSString).deletingLastPathComponent
        try createDirectory(folder.isEmpty ? "." : folder)
        let temporary = path + ".incoming-\(UUID().uuidString.lowercased())"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, mode_t(permissions))
        guard descriptor >= 0 else { throw error("create", temporary) }
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        do {
            defer { close(descriptor) }
            try data.withUnsafeBytes { bytes in
                var written = 0
                while written < bytes.count {
                    let count = systemWrite(descriptor, bytes.baseAddress! + written, bytes.count - written)
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { throw error("write", temporary) }
                    written += count
                }
            }
            try sync(descriptor: descriptor, path: temporary)
        }
        try rename(temporary, to: path)
        renamed = true
    }

    /// A failed file operation, with the system's reason.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var operation: String
        public var path: String
        public var code: Int32
        public var description: String { "cannot \(operation) \(path): \(String(cString: strerror(code)))" }
        /// The disk is full (or over quota).
        public var isFull: Bool { code == ENOSPC || code == EDQUOT }
    }

    static func error(_ operation: String, _ path: String) -> Failure { Failure(operation: operation, path: path, code: errno) }

    private static func retrying(_ path: String, _ operation: String, _ body: () -> Int32) throws {
        while body() != 0 {
            if errno == EINTR { continue }
            throw error(operation, path)
        }
    }

    private static func systemRename(_ source: String, _ destination: String) -> Int32 {
        #if canImport(Darwin)
        return Darwin.rename(source, destination)
        #elseif canImport(Glibc)
        return Glibc.rename(source, destination)
        #else
        return Musl.rename(source, destination)
        #endif
    }

    private static func systemWrite(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Darwin)
        return Darwin.write(descriptor, bytes, count)
        #elseif canImport(Glibc)
        return Glibc.write(descriptor, bytes, count)
        #else
        return Musl.write(descriptor, bytes, count)
        #endif
    }

    /// Reaches the medium: `F_FULLFSYNC` on Apple platforms (falling back to
    /// fsync where the filesystem does not support it), fsync elsewhere.
    private static func fullSync(_ descriptor: Int32) -> Int32 {
        #if canImport(Darwin)
        if fcntl(descriptor, F_FULLFSYNC) == 0 { return 0 }
        #endif
        return fsync(descriptor)
    }

    // MARK: Observers

    private static let observers = ObserverTable()

    /// Hears every sync of a file or folder at or under `root` until removed.
    package static func observe(_ root: String, _ observer: any DurableFilesObserver) {
        observers.set(root, observer)
    }

    package static func stopObserving(_ root: String) { observers.set(root, nil) }

    static func observer(for path: String) -> (any DurableFilesObserver)? { observers.find(path) }

    private final class ObserverTable: @unchecked Sendable {
        // @unchecked Sendable: `table` is read and written under `lock`.
        private let lock = NSLock()
        private var table: [String: any DurableFilesObserver] = [:]

        func set(_ root: String, _ observer: (any DurableFilesObserver)?) {
            lock.lock()
            defer { lock.unlock() }
            table[root] = observer
        }

        func find(_ path: String) -> (any DurableFilesObserver)? {
            lock.lock()
            defer { lock.unlock() }
            for (root, observer) in table where path == root || path.hasPrefix(root + "/") { return observer }
            return nil
        }
    }
}

/// Hears what ``DurableFiles`` made durable (the power-loss model of the tests).
package protocol DurableFilesObserver: AnyObject, Sendable {
    /// The file's current bytes are durable.
    func synced(file path: String)
    /// The folder's current names are durable.
    func synced(directory path: String)
    /// A file was renamed (its name in the new place is durable only once the folder is synced).
    func renamed(from source: String, to destination: String)
}
