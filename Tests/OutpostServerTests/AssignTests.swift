import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// An assignment names a user and team the server knows (one that holds a
/// token, even a revoked one, or owns records); anything else is refused
/// and changes nothing.
@Suite("Assign to known users", .timeLimit(.minutes(3)))
struct AssignTests {
    @Test(arguments: Backend.available)
    func anUnknownOwnerOrTeamIsRefusedAndNothingChanges(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let ana = try live.token("u-1", team: "t-1")
        let bea = try live.token("u-2", team: "t-2")
        let admin = try live.token("a-1", .admin, team: "hq")
        let device = TestDevice()
        let uuid = UUID()
        _ = try await live.push(device.request(device.mutation(.create, uuid: uuid, data: ["name": "Ana"])), token: ana)
        let target = "/v1/records/people/\(uuid.wireText)/assign"
        let before = try HostileFixture.snapshot(live)

        for (body, field) in [
            (#"{"owner": "u-ghost", "team": "t-1"}"#, "owner"), (#"{"owner": "u-2", "team": "t-typo"}"#, "team"),
            (#"{"owner": "U-2", "team": "t-2"}"#, "owner"),
        ] {
            let refused = try await live.send("POST", target, token: admin, body: Data(body.utf8))
            #expect(refused.status == 400, "\(body): \(refused.status) \(refused.text)")
            #expect(refused.error?.code == .invalidRequest)
            #expect(refused.error?.fields?[field] != nil, "\(body): \(refused.text)")
            #expect(refused.error?.message.contains("no user") == true || refused.error?.message.contains("no team") == true)
        }
        let after = try HostileFixture.snapshot(live)
        for table in before.keys.sorted() { #expect(before[table] == after[table], "a refused assign changed \(table)") }
        #expect(try await live.get("/v1/records/people/\(uuid.wireText)", token: ana).status == 200, "still Ana's")

        // A user whose only token was revoked is still known; so is one who owns records.
        let carla = try live.token("u-3", team: "t-3")
        #expect(try live.server.tokens.revoke(carla))
        let toCarla = try await live.send("POST", target, token: admin, body: Data(#"{"owner": "u-3", "team": "t-3"}"#.utf8))
        #expect(toCarla.status == 200, "\(toCarla.text)")
        let toBea = try await live.send("POST", target, token: admin, body: Data(#"{"owner": "u-2", "team": "t-2"}"#.utf8))
        #expect(toBea.status == 200, "\(toBea.text)")
        #expect(try await live.get("/v1/records/people/\(uuid.wireText)", token: bea).status == 200)
    }
}
