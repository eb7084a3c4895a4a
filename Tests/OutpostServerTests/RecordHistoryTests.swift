import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// A record's history shows every version with the data it had, while the
/// database keeps the newest version's data once, in the record's row.
@Suite("Record history", .timeLimit(.minutes(3)))
struct RecordHistoryTests {
    @Test(arguments: Backend.available)
    func everyVersionShowsItsDataAndTheNewestIsKeptOnce(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let ana = try live.token("ana", team: "north")
        _ = try live.token("bruno", team: "south")
        var admin = ConsoleClient(live)
        try await admin.signIn(try live.token("boss", .admin))
        let device = TestDevice()
        let (person, once) = (UUID(), UUID())
        _ = try await live.push(
            device.request(
                device.mutation(.create, uuid: person, data: ["name": "Rosa", "phone": "555-0001"]),
                device.mutation(.create, uuid: once, data: ["name": "Ilse"])), token: ana)
        _ = try await live.push(device.request(device.mutation(.update, uuid: person, data: ["phone": "555-0002"])), token: ana)
        // Two edits of one record in one push.
        _ = try await live.push(
            device.request(
                device.mutation(.update, uuid: person, data: ["phone": "555-0003"]),
                device.mutation(.update, uuid: person, data: ["name": "Rosa Ruiz"])), token: ana)
        func history(_ uuid: UUID) async throws -> [JSONValue] {
            try await admin.get("/admin/api/records/people/\(uuid.wireText)")["history"]?.arrayValue ?? []
        }
        func copiesOfData(_ uuid: UUID) throws -> Int64 {
            try live.database.read {
                try $0.first(
                    "SELECT COUNT(*) FROM record_history WHERE uuid = ? AND data IS NOT NULL", [.text(uuid.wireText)])?.int(0) ?? -1
            }
        }
        #expect(try await history(once).map { $0["data"]?["name"] } == ["Ilse"], "a record written once shows its data")
        #expect(try copiesOfData(once) == 0, "and keeps it once, in its row")

        #expect(try await admin.send("POST", "/admin/api/records/people/\(person.wireText)/assign", json: #"{"owner": "bruno", "team": "south"}"#).status == 200)
        let versions = try await history(person)
        #expect(versions.map { $0["op"] } == ["assign", "update", "update", "update", "create"])
        #expect(versions.map { $0["data"]?["name"] } == ["Rosa Ruiz", "Rosa Ruiz", "Rosa", "Rosa", "Rosa"])
        #expect(versions.map { $0["data"]?["phone"] } == ["555-0003", "555-0003", "555-0003", "555-0002", "555-0001"])
        #expect(versions.map { $0["owner"] } == ["bruno", "ana", "ana", "ana", "ana"])
        #expect(try copiesOfData(person) == 4, "every version but the newest holds its data")

        let bruno = try live.token("bruno", team: "south")
        _ = try await live.push(device.request(device.mutation(.delete, uuid: person)), token: bruno)
        let deleted = try await history(person)
        #expect(deleted.map { $0["op"] } == ["delete", "assign", "update", "update", "update", "create"])
        #expect(deleted.first?["data"] == .null, "a tombstone has no data")
        #expect(deleted.dropFirst().map { $0["data"]?["name"] } == ["Rosa Ruiz", "Rosa Ruiz", "Rosa", "Rosa", "Rosa"])
    }
}
