import Foundation
import OutpostCore

/// The console's sign-in: an administrator's token is exchanged once for a
/// session cookie, so the token never sits in the browser's storage.
///
/// - The cookie is `HttpOnly` (no script reads it), `SameSite=Strict` (no
///   other site's page sends it) and `Secure` when the server speaks TLS, or
///   when its trusted proxy says the browser reached it over HTTPS.
/// - Every state-changing request also carries the session's CSRF token in
///   `X-CSRF-Token`, which only the console's own script can read.
/// - A new session is made at every sign-in, whatever cookie came with it
///   (no fixation); only the cookie's hash is stored.
/// - A session ends at sign-out, after `idleLimit` without a request, after
///   `lifetime`, when the token it came from expires, or at once when that
///   token is revoked.
struct ConsoleSessions {
    let database: any ServerDatabase
    let tokens: TokenStore
    let clock: any WallClock

    static let cookieName = "outpost_console"
    static let lifetime: TimeInterval = 8 * 3_600
    static let idleLimit: TimeInterval = 30 * 60

    /// A signed-in administrator.
    struct Session {
        var user: String
        var csrf: String
        var expiresAt: String
    }

    /// Signs in with `token`; returns the cookie value and the session.
    func signIn(token: String) throws -> (cookie: String, session: Session) {
        let principal: Principal
        do {
            principal = try tokens.authenticate(token.trimmingCharacters(in: .whitespacesAndNewlines))
        } catch let failure as TokenStore.Failure {
            throw SyncServer.authError(failure)
        }
        guard principal.role == .admin else {
            throw APIError(
                .forbidden,
                "This token belongs to \(principal.user), a \(principal.role.rawValue) user. The console is for administrators: sign in with an admin token.")
        }
        let now = clock.now()
        var expires = now + Self.lifetime
        if let tokenExpiry = principal.expiresAt { expires = min(expires, tokenExpiry) }
        let cookie = Self.randomText()
        let session = Session(user: principal.user, csrf: Self.randomText(), expiresAt: ServerTimestamp(expires).rawValue)
        // A JWT has no row to revoke; its session ends with its expiry.
        let trimmed = token.trimmingCharacters(in: .whitespacesAndNewlines)
        let tokenHash = tokens.jwt != nil && JWTVerifier.looksLikeJWT(trimmed) ? nil : SHA256.hex(of: trimmed.utf8)
        try database.write { sql in
            try sql.execute(
                """
                INSERT INTO admin_sessions (hash, user_id, csrf, token_hash, created_at, expires_at, last_seen_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(SHA256.hex(of: cookie.utf8)), .text(session.user), .text(session.csrf), .text(tokenHash),
                    .text(ServerTimestamp(now).rawValue), .text(session.expiresAt), .text(ServerTimestamp(now).rawValue),
                ])
        }
        return (cookie, session)
    }

    /// The session a cookie stands for; 401 when there is none, or it ended.
    func session(cookie: String?) throws -> Session {
        let signIn = APIError(.unauthenticated, "Sign in to the console with an administrator's token.")
        guard let cookie, !cookie.isEmpty, cookie.utf8.count <= 100 else { throw signIn }
        let hash = SHA256.hex(of: cookie.utf8)
        let now = clock.now()
        let row = try database.read { sql in
            try sql.first(
                """
                SELECT s.user_id, s.csrf, s.expires_at, s.last_seen_at, s.token_hash IS NULL OR EXISTS (
                    SELECT 1 FROM tokens t WHERE t.hash = s.token_hash AND t.revoked_at IS NULL)
                FROM admin_sessions s WHERE s.hash = ?
                """, [.text(hash)])
        }
        guard let row else { throw signIn }
        let expiresAt = row.string(2)
        let lastSeen = ServerTimestamp(rawValue: row.string(3)).date ?? .distantPast
        guard row.bool(4), expiresAt > ServerTimestamp(now).rawValue, now.timeIntervalSince(lastSeen) < Self.idleLimit else {
            try? end(cookie: cookie)
            throw APIError(.unauthenticated, "Your console session has ended. Sign in again.")
        }
        // Seen again: written at most once a minute, not on every request.
        if now.timeIntervalSince(lastSeen) > 60 {
            try database.write { sql in
                try sql.execute(
                    "UPDATE admin_sessions SET last_seen_at = ? WHERE hash = ?", [.text(ServerTimestamp(now).rawValue), .text(hash)])
            }
        }
        return Session(user: row.string(0), csrf: row.string(1), expiresAt: expiresAt)
    }

    /// Ends a session (sign-out); nothing when there is none.
    func end(cookie: String) throws {
        try database.write { sql in
            try sql.execute("DELETE FROM admin_sessions WHERE hash = ?", [.text(SHA256.hex(of: cookie.utf8))])
        }
    }

    /// The `Set-Cookie` header of a new session, or of one being removed (nil).
    static func cookieHeader(_ value: String?, secure: Bool) -> String {
        let attributes = "Path=/admin; HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
        guard let value else { return "\(cookieName)=; \(attributes); Max-Age=0" }
        return "\(cookieName)=\(value); \(attributes); Max-Age=\(Int(lifetime))"
    }

    /// The console's cookie in a `Cookie` header, if present.
    static func cookie(in header: String?) -> String? {
        guard let header else { return nil }
        for pair in header.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == cookieName {
                return parts[1].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }

    /// 32 random bytes as URL-safe text.
    static func randomText() -> String {
        var random = SystemRandomNumberGenerator()
        return Base64URL.encode((0..<32).map { _ in UInt8.random(in: 0...255, using: &random) })
    }
}
