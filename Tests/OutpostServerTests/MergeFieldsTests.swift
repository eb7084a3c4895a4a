import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// The `merge_fields` conflict policy, over a real socket, once per backend:
/// a stale update is applied when no field it sends changed since its base,
/// and is a conflict naming the fields changed on both sides otherwise.
@Suite("Conflicts by field", .timeLimit(.minutes(5)))
struct MergeFieldsTests {
    static func server(_ backend: Backend) throws -> LiveServer {
        var notes = CollectionSchema(
            name: "notes",
            fields: [
                "title": FieldSchema(.text), "body": FieldSchema(.text), "tag": FieldSchema(.text), "place": FieldSchema(.text),
            ])
        notes.policy = .mergeFields
        return try LiveServer(backend, config: try ServerConfig(collections: DefaultCollections.all + [notes]))
    }

    @Test(arguments: Backend.available)
    func aStaleUpdateOfOtherFieldsIsMergedAndOfTheSameFieldConflicts(_ backend: Backend) async throws {
        let live = try Self.server(backend)
        let token = try live.token("u-1")
        let phone = TestDevice()
        let office = TestDevice()
        let uuid = UUID()
        let created = try await live.push(
            phone.request(phone.mutation(.create, "notes", uuid: uuid, data: ["title": "a", "body": "b", "tag": "t"])),
            token: token)
        let v1 = try #require(created.results[0].record?.version)
        // The office edits the title, then the tag, from the newest copy each time.
        let title = try await live.push(
            office.request(office.mutation(.update, "notes", uuid: uuid, base: v1, data: ["title": "A"])), token: token)
        let v2 = try #require(title.results[0].record?.version)
        _ = try await live.push(
            office.request(office.mutation(.update, "notes", uuid: uuid, base: v2, data: ["tag": "T"])), token: token)

        // The phone, still at v1, edits the body only: nothing it sends changed since.
        let body = try await live.push(
            phone.request(phone.mutation(.update, "notes", uuid: uuid, base: v1, data: ["body": "B"])), token: token)
        #expect(body.results[0].status == .applied)
        #expect(body.results[0].record?.data == ["title": "A", "body": "B", "tag": "T"], "both sides' edits kept")
        #expect(body.results[0].fields == nil)

        // Still at v1, it edits the title, the tag and the place: the first two
        // changed since, so nothing is applied.
        let stale = phone.mutation(.update, "notes", uuid: uuid, base: v1, data: ["title": "x", "tag": "y", "place": "p"])
        let clash = try await live.push(phone.request(stale), token: token)
        #expect(clash.results[0].status == .conflict)
        #expect(clash.results[0].fields == ["tag", "title"], "the fields changed on both sides, not the place")
        #expect(clash.results[0].record?.data == ["title": "A", "body": "B", "tag": "T"], "nothing of it applied")

        // Resent (its answer lost), the same seq carries the same fields.
        let again = try await live.push(phone.request(stale), token: token)
        #expect(again.results[0].status == .duplicate)
        #expect(again.results[0].originalStatus == .conflict)
        #expect(again.results[0].fields == ["tag", "title"])
    }

    @Test(arguments: Backend.available)
    func aStaleDeleteConflictsAndAFreshUpdateIsApplied(_ backend: Backend) async throws {
        let live = try Self.server(backend)
        let token = try live.token("u-1")
        let device = TestDevice()
        let uuid = UUID()
        let created = try await live.push(
            device.request(device.mutation(.create, "notes", uuid: uuid, data: ["title": "a"])), token: token)
        let v1 = try #require(created.results[0].record?.version)
        let edit = try await live.push(
            device.request(device.mutation(.update, "notes", uuid: uuid, base: v1, data: ["body": "b"])), token: token)
        #expect(edit.results[0].status == .applied)
        let stale = try await live.push(device.request(device.mutation(.delete, "notes", uuid: uuid, base: v1)), token: token)
        #expect(stale.results[0].status == .conflict, "a delete from a stale base loses, as under server_wins")
        #expect(stale.results[0].record?.deleted == false)
    }

    @Test func thePolicyIsReadFromTheConfiguration() throws {
        let schema = try WireCoding.decode(
            CollectionSchema.self,
            from: Data(#"{"name": "notes", "policy": "merge_fields", "fields": {"title": {"type": "text"}}}"#.utf8))
        #expect(schema.policy == .mergeFields)
    }
}
