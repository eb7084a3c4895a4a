public import Foundation
import OutpostCore

/// Why an action that needs the server's confirmation is not done.
public enum ConfirmationError: Error, Sendable, Equatable {
    /// It never reached the server (no network, signed out, the server
    /// busy before it was sent): nothing was kept or queued. Say so plainly
    /// and let the person try again.
    case notSent(SyncFailure)
    /// It was sent and no answer came: the server may hold it. It stays
    /// queued under the same number and the next sync resolves it (the
    /// server applies it at most once). Show "checking result", never "done".
    case checkingResult(UUID)
    /// The server refused it, with its reason; nothing was kept.
    case refused(Rejection)
}

extension SyncEngine {
    /// Sends an action that must be confirmed by the server before the
    /// person is told it happened (a clock-in, a payment): at once, never
    /// left waiting in the queue. It fails fast while the device is offline,
    /// and returns only with the server's result, so a screen shows
    /// "registered" only once the server did.
    ///
    /// - Returns: the record as the server confirmed it (``LocalRecord/serverUpdatedAt``
    ///   is when it was received, ``LocalRecord/deviceTime`` when the person acted).
    /// - Throws: ``ConfirmationError``.
    @discardableResult
    public func submit<T: SyncRecord>(_ value: T, timeout: Duration = .seconds(20)) async throws -> LocalRecord<T> {
        if connectivity.state == .offline { throw ConfirmationError.notSent(.offline) }
        if status.signInRequired { throw ConfirmationError.notSent(.signInRequired) }
        let uuid = try await store.create(value)
        var failure: SyncFailure?
        do {
            try await sync(timeout: timeout)
        } catch let error as SyncFailure {
            failure = error
        } catch is CancellationError {
            failure = .noAnswer
        }
        if let record = try await store.get(T.self, uuid) {
            switch record.syncState {
            case .synced:
                return record
            case .rejected:
                try await store.delete(T.self, uuid)
                throw ConfirmationError.refused(record.rejection ?? Rejection(code: "rejected", errors: [:], op: .create))
            case .pending, .sending:
                break
            }
        }
        // Sent at least once: the server may hold it, so it stays and is resolved by resending.
        let queued = try await store.outboxEntries().filter { $0.record.uuid == uuid }
        if queued.contains(where: \.wasSent) { throw ConfirmationError.checkingResult(uuid) }
        try? await store.delete(T.self, uuid)
        throw ConfirmationError.notSent(failure ?? .offline)
    }
}
