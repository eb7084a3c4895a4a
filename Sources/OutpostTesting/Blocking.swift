import Foundation

/// Runs blocking work (waiting on a child process, reading its pipe) on a
/// thread of its own, so it never holds one of the few threads Swift
/// concurrency shares between all running tests (two on a 2-core machine).
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result(catching: body)) }
    }
}
