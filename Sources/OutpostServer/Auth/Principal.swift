public import Foundation
public import OutpostCore

/// Who is calling: the user a token belongs to, with role and team.
public struct Principal: Sendable, Equatable {
    public var user: String
    public var role: Role
    public var team: String
    /// When the token it came from stops working, if it does: a console
    /// session made from it ends no later.
    public var expiresAt: Date?

    public init(user: String, role: Role, team: String, expiresAt: Date? = nil) {
        self.user = user
        self.role = role
        self.team = team
        self.expiresAt = expiresAt
    }
}
