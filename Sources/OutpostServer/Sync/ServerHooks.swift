import Foundation

/// Points where tests inject delays or failures into the real request
/// handling: a push that holds its transaction open before committing (the
/// "writer that started first and commits last" of the gap tests), or one
/// that fails transiently.
final class ServerHooks: @unchecked Sendable {
    // @unchecked Sendable: `beforeCommit` is only read or written while `lock` is held.
    private let lock = NSLock()
    private var beforeCommit: (@Sendable (_ user: String) throws -> Void)?

    /// Runs inside every push transaction, after its effects and before COMMIT.
    var beforePushCommit: (@Sendable (_ user: String) throws -> Void)? {
        get {
            lock.lock()
            defer { lock.unlock() }
            return beforeCommit
        }
        set {
            lock.lock()
            beforeCommit = newValue
            lock.unlock()
        }
    }
}
