public import Foundation
public import OutpostCore

/// Bearer tokens: opaque random strings handed to a user once and stored only
/// as SHA-256 hashes, with an expiry and a revocation time.
///
/// With JWT settings, tokens shaped like a JWT are checked against the app's
/// identity provider instead (``JWTVerifier``); both kinds work at once.
public struct TokenStore: Sendable {
    let database: any ServerDatabase
    let clock: any WallClock
    let jwt: JWTVerifier?

    public init(database: any ServerDatabase, clock: any WallClock = SystemWallClock()) {
        self.init(database: database, clock: clock, jwt: nil)
    }

    init(database: any ServerDatabase, clock: any WallClock, jwt: JWTVerifier?) {
        self.database = database
        self.clock = clock
        self.jwt = jwt
    }

    /// Why a request was not authenticated.
    public enum Failure: Error, Sendable, Equatable {
        case missing
        case unknown
        case expired
        case revoked
        /// A JWT that failed a check, with which one.
        case refused(String)
    }

    /// Makes a token for a user; the token itself is returned once and never stored.
    public func issue(user: String, role: Role, team: String, ttl: TimeInterval?) throws -> String {
        var random = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }
        let token = "opt_" + Base64URL.encode(bytes)
        let now = clock.now()
        try database.write { sql in
            try sql.execute(
                "INSERT INTO tokens (hash, user_id, role, team, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    .text(SHA256.hex(of: token.utf8)), .text(user), .text(role.rawValue), .text(team),
                    .text(ServerTimestamp(now).rawValue), .text(ttl.map { ServerTimestamp(now + $0).rawValue }),
                ])
        }
        return token
    }

    /// Revokes a token; false when no such token exists.
    @discardableResult
    public func revoke(_ token: String) throws -> Bool {
        try revoke(hash: SHA256.hex(of: token.utf8))
    }

    /// Revokes the token stored under this hash (the console names tokens by it).
    func revoke(hash: String) throws -> Bool {
        try database.write { sql in
            try sql.execute(
                "UPDATE tokens SET revoked_at = ? WHERE hash = ? AND revoked_at IS NULL",
                [.text(ServerTimestamp(clock.now()).rawValue), .text(hash)]) > 0
        }
    }

    /// A user or team name the server stores: 1 to 200 bytes, no control
    /// characters (PostgreSQL refuses NUL outright).
    static func isPrintableName(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 200 && !text.utf8.contains { $0 < 0x20 || $0 == 0x7F }
    }

    /// The principal a token stands for. Checked on every request, so a
    /// revocation takes effect at once on every server process.
    public func authenticate(_ token: String?) throws -> Principal {
        guard let token, !token.isEmpty else { throw Failure.missing }
        if let jwt, JWTVerifier.looksLikeJWT(token) {
            do {
                return try jwt.principal(token)
            } catch JWTVerifier.Failure.expired {
                throw Failure.expired
            } catch let failure as JWTVerifier.Failure {
                throw Failure.refused(failure.description)
            }
        }
        guard token.utf8.count <= 256,
            let row = try database.read({ sql in
                try sql.first(
                    "SELECT user_id, role, team, expires_at, revoked_at FROM tokens WHERE hash = ?",
                    [.text(SHA256.hex(of: token.utf8))])
            }), let role = Role(rawValue: row.string(1))
        else { throw Failure.unknown }
        if row.optionalString(4) != nil { throw Failure.revoked }
        if let expires = row.optionalString(3), expires <= ServerTimestamp(clock.now()).rawValue {
            throw Failure.expired
        }
        return Principal(
            user: row.string(0), role: role, team: row.string(2),
            expiresAt: row.optionalString(3).flatMap { ServerTimestamp(rawValue: $0).date })
    }
}
