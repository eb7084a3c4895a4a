import Foundation
import OutpostCore

/// Points where tests inject delays or failures into the real request
/// handling: a push that holds its transaction open before committing (the
/// "writer that started first and commits last" of the gap tests), or one
/// that fails transiently.
final class ServerHooks: Sendable {
    private let beforeCommit = Locked<(@Sendable (_ user: String) throws -> Void)?>(nil)

    /// Runs inside every push transaction, after its effects and before COMMIT.
    var beforePushCommit: (@Sendable (_ user: String) throws -> Void)? {
        get { beforeCommit.current }
        set { beforeCommit.withLock { $0 = newValue } }
    }
}
