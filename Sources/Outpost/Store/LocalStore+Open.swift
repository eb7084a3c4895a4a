import Foundation
public import OutpostCore
public import OutpostSQLite

/// How far opening a store has come while it seals the payloads written
/// before a cipher was first given (each record, queued change and
/// conflict report, once).
public struct OpenProgress: Sendable, Equatable {
    /// Payloads sealed so far.
    public var sealed: Int
    /// Payloads to seal in all.
    public var total: Int

    package init(sealed: Int, total: Int) {
        self.sealed = sealed
        self.total = total
    }

    /// Sealed so far as a fraction of the whole, 0 to 1.
    public var fraction: Double { total == 0 ? 1 : Double(sealed) / Double(total) }
}

extension LocalStore {
    /// How long a statement waits for another process's lock unless told (5 s).
    public static let defaultBusyTimeout: Duration = .seconds(5)

    /// Opens the database at `path` off the calling thread, on the store's
    /// own queue: migrations, a first cipher's sealing of every payload
    /// written before (reported through `progress`, from that queue) and
    /// the checkpoint that follows it never hold the main thread or a
    /// cooperative one. Use it from the main thread (an `App`'s launch);
    /// the parameters mean what they mean for
    /// ``init(path:collections:clock:ids:protection:cipher:ifDatabaseLost:durability:busyTimeout:)``.
    ///
    /// ```swift
    /// let store = try await LocalStore.open(path: dbPath, collections: [Note.descriptor], cipher: cipher) { step in
    ///     Task { @MainActor in sealing = step.fraction }
    /// }
    /// ```
    public static func open(
        path: String, collections: [CollectionDescriptor], clock: any WallClock = SystemWallClock(),
        ids: any IDGenerator = UUIDv7Generator(), protection: FileProtection = .untilFirstUnlock,
        cipher: (any PayloadCipher)? = nil, ifDatabaseLost: LostDatabasePolicy = .refuse, durability: Durability = .powerLoss,
        busyTimeout: Duration = LocalStore.defaultBusyTimeout, progress: (@Sendable (OpenProgress) -> Void)? = nil
    ) async throws -> LocalStore {
        let executor = StoreExecutor()
        return try await withCheckedThrowingContinuation { continuation in
            executor.queue.async {
                continuation.resume(
                    with: Result {
                        try LocalStore(
                            path: path, collections: collections, clock: clock, ids: ids, protection: protection,
                            cipher: cipher, ifDatabaseLost: ifDatabaseLost, vfs: nil, lockWait: busyTimeout,
                            durability: durability, executor: executor, progress: progress)
                    })
            }
        }
    }

    /// The busy timeout in SQLite's milliseconds, or a clear refusal.
    static func milliseconds(busyTimeout: Duration) throws -> Int32 {
        guard busyTimeout >= .zero, busyTimeout <= .seconds(3600) else {
            throw StoreError.invalidSetting("busyTimeout must lie between 0 and one hour (got \(busyTimeout))")
        }
        return Int32(busyTimeout / .milliseconds(1))
    }
}
