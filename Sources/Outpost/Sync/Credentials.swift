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

/// The engine's credentials, as a value: the bearer token it holds and
/// the app's sign-in it asks for another. It decides what an answer of the
/// sign-in means; asking (I/O) is the engine's ``SyncEngine/obtainToken(_:)``.
package struct Credentials {
    /// The token requests carry; nil until one is set or given.
    package private(set) var token: String?
    /// The app's sign-in, asked for tokens (nil when a token is set by hand).
    let provider: CredentialsProvider?

    package init(token: String?, provider: CredentialsProvider? = nil) {
        self.token = token
        self.provider = provider
    }

    /// Whether the app's sign-in gives the tokens.
    package var hasProvider: Bool { provider != nil }

    /// A token set by hand (the person signed in again).
    package mutating func replace(with token: String) { self.token = token }

    /// Signed out: no token until the next sign-in.
    package mutating func forget() { token = nil }

    /// The sign-in's answer to `request`; returns true when a token to use
    /// now is held. No token (or an empty one) means signed out; the very
    /// token the server refused is no fresh one.
    package mutating func received(_ answer: String?, for request: CredentialsRequest) -> Bool {
        guard let answer, !answer.isEmpty else {
            token = nil
            return false
        }
        if case .refused(let refused) = request, answer == refused { return false }
        token = answer
        return true
    }
}

extension SyncEngine {
    /// The token requests carry now.
    var token: String? { credentials.token }

    /// Asks the provider, when there is one, for a token to use now.
    /// Returns true when a token is held afterwards.
    func obtainToken(_ request: CredentialsRequest) async throws -> Bool {
        guard let provider = credentials.provider else { return token != nil }
        let answer: String?
        do {
            answer = try await provider(request)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            // The app's sign-in could not answer now: not a sign-out.
            throw SyncFailure.credentialsUnavailable("\(error)")
        }
        return credentials.received(answer, for: request)
    }
}
