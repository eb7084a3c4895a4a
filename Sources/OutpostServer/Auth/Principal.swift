public import OutpostCore

/// Who is calling: the user a token belongs to, with role and team.
public struct Principal: Sendable, Equatable {
    public var user: String
    public var role: Role
    public var team: String

    public init(user: String, role: Role, team: String) {
        self.user = user
        self.role = role
        self.team = team
    }
}
