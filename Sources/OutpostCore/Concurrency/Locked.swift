import Foundation

/// A value shared between threads, reachable only while its lock is held.
///
/// The one place the package pairs a lock with the state it guards, so a
/// type holding one needs no `@unchecked Sendable` of its own: every read
/// and write goes through ``withLock(_:)`` and cannot forget the lock.
/// (`Synchronization.Mutex` does the same from iOS 18 and macOS 15; the
/// library still supports iOS 17.)
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched inside `withLock`, under `lock`.
    private let lock = NSLock()
    private var value: Value

    package init(_ value: Value) { self.value = value }

    /// Runs `body` with the value while the lock is held; what it returns is returned.
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    /// The value now (a copy).
    package var current: Value { withLock { $0 } }
}
