import Foundation

/// Why the engine asks the app for a token.
public enum CredentialsRequest: Sendable, Equatable {
    /// The engine is about to talk to the server and holds no token yet.
    case start
    /// The server refused this token (`401`): it expired or was replaced.
    case refused(String)
}

/// The app's sign-in, asked for a bearer token when the engine starts and
/// when the server refuses the one it has; never while the device is
/// offline. Return the token (a JWT from the app's own sign-in refreshes
/// itself this way), or nil when the person must sign in again: the status
/// then says so and capture goes on. A thrown error means "not now" (the
/// sign-in service could not be reached): the engine tries again later.
///
/// ```swift
/// let engine = SyncEngine(store: store, transport: transport) { request in
///     try await auth.currentToken(forceRefresh: request != .start)
/// }
/// ```
public typealias CredentialsProvider = @Sendable (CredentialsRequest) async throws -> String?

extension SyncEngine {
    /// Asks the provider, when there is one, for a token to use now.
    /// Returns true when a token is held afterwards.
    func obtainToken(_ request: CredentialsRequest) async throws -> Bool {
        guard let credentials else { return token != nil }
        let answer: String?
        do {
            answer = try await credentials(request)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            // The app's sign-in could not answer now: not a sign-out.
            throw SyncFailure.credentialsUnavailable("\(error)")
        }
        guard let answer, !answer.isEmpty else {
            token = nil
            return false
        }
        if case .refused(let refused) = request, answer == refused { return false }
        token = answer
        return true
    }
}
