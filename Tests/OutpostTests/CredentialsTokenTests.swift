import Foundation
import Outpost
import Testing

/// The credentials alone: what an answer of the app's sign-in means.
@Suite("Credentials", .timeLimit(.minutes(1)))
struct CredentialsTokenTests {
    @Test func anAnswerGivesTheTokenToUse() {
        var credentials = Credentials(token: nil, provider: { _ in "t-1" })
        #expect(credentials.hasProvider)
        #expect(credentials.received("t-1", for: .start) == true)
        #expect(credentials.token == "t-1")
    }

    @Test func noTokenOrAnEmptyOneMeansSignedOut() {
        var credentials = Credentials(token: "old")
        #expect(!credentials.hasProvider)
        #expect(credentials.received(nil, for: .start) == false)
        #expect(credentials.token == nil)
        credentials.replace(with: "t-2")
        #expect(credentials.received("", for: .refused("t-2")) == false)
        #expect(credentials.token == nil)
    }

    @Test func theRefusedTokenAgainIsNoFreshOne() {
        var credentials = Credentials(token: "t-1")
        #expect(credentials.received("t-1", for: .refused("t-1")) == false)
        #expect(credentials.token == "t-1", "kept: the next sign-in replaces it")
        #expect(credentials.received("t-2", for: .refused("t-1")) == true)
        #expect(credentials.token == "t-2")
    }

    @Test func signingOutForgetsTheToken() {
        var credentials = Credentials(token: "t-1")
        credentials.forget()
        #expect(credentials.token == nil)
    }
}
