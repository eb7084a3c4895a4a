import Foundation
import Outpost
import OutpostCore
import OutpostServer
import Testing

/// Two devices edit one record offline, on a collection whose conflicts are
/// resolved by field: disjoint edits both land; an edit of a field changed
/// on the server too is reported naming that field, and the person keeps
/// their own value of it, or the server's.
@Suite("Conflicts by field, device to device", .timeLimit(.minutes(5)))
struct ConflictsByFieldTests {
    struct Note: SyncRecord, Equatable {
        static let collection = "notes"
        var title: String
        var body: String?
        var tag: String?
    }

    static func harness() throws -> SyncHarness {
        var notes = CollectionSchema(
            name: "notes",
            fields: ["title": FieldSchema(.text, required: true), "body": FieldSchema(.text), "tag": FieldSchema(.text)])
        notes.policy = .mergeFields
        return try SyncHarness(config: try ServerConfig(collections: DefaultCollections.all + [notes]))
    }

    @Test func disjointEditsMergeAndTheSameFieldIsReportedByName() async throws {
        let harness = try Self.harness()
        let phone = try harness.device("u-1", name: "phone", collections: [Note.descriptor])
        let tablet = try harness.device("u-1", name: "tablet", collections: [Note.descriptor])
        let id = try await phone.store.create(Note(title: "Pump", body: "leaks", tag: "open"))
        try await phone.engine.sync()
        try await tablet.engine.sync()

        // Both offline: the tablet edits the body and the tag, the phone the title and the tag.
        try await tablet.store.update(Note.self, id) { $0.body = "leaks at the seal"; $0.tag = "urgent" }
        try await phone.store.update(Note.self, id) { $0.title = "Pump 3"; $0.tag = "closed" }
        try await tablet.engine.sync()
        let report = try await phone.engine.sync()

        #expect(report.conflicts.count == 1)
        let conflict = try #require(try await phone.store.conflicts().first)
        #expect(conflict.fields == ["tag"], "only the tag was changed on both sides")
        #expect(try await phone.store.get(Note.self, id)?.value == Note(title: "Pump", body: "leaks at the seal", tag: "urgent"))

        // The person keeps their own tag (and so their title, which the server never changed).
        try await phone.store.resolveConflict(conflict.id, keepingMine: ["tag", "title"])
        #expect(try await phone.store.conflicts().isEmpty)
        try await phone.engine.sync()
        try await tablet.engine.sync()
        let merged = Note(title: "Pump 3", body: "leaks at the seal", tag: "closed")
        #expect(try await phone.store.get(Note.self, id)?.value == merged)
        #expect(try await tablet.store.get(Note.self, id)?.value == merged)
    }

    @Test func anEditOfOtherFieldsLandsWithoutAConflict() async throws {
        let harness = try Self.harness()
        let phone = try harness.device("u-1", name: "phone", collections: [Note.descriptor])
        let tablet = try harness.device("u-1", name: "tablet", collections: [Note.descriptor])
        let id = try await phone.store.create(Note(title: "Gate"))
        try await phone.engine.sync()
        try await tablet.engine.sync()
        try await tablet.store.update(Note.self, id) { $0.body = "hinge broken" }
        try await phone.store.update(Note.self, id) { $0.tag = "north" }
        try await tablet.engine.sync()
        let report = try await phone.engine.sync()
        #expect(report.conflicts.isEmpty)
        #expect(try await phone.store.get(Note.self, id)?.value == Note(title: "Gate", body: "hinge broken", tag: "north"))
    }

    @Test func keepingAFieldTheLostEditNeverSetIsRefused() async throws {
        let harness = try Self.harness()
        let phone = try harness.device("u-1", name: "phone", collections: [Note.descriptor])
        let tablet = try harness.device("u-1", name: "tablet", collections: [Note.descriptor])
        let id = try await phone.store.create(Note(title: "Valve"))
        try await phone.engine.sync()
        try await tablet.engine.sync()
        try await tablet.store.update(Note.self, id) { $0.title = "Valve A" }
        try await phone.store.update(Note.self, id) { $0.title = "Valve B" }
        try await tablet.engine.sync()
        try await phone.engine.sync()
        let conflict = try #require(try await phone.store.conflicts().first)
        #expect(conflict.fields == ["title"])
        await #expect(throws: StoreError.self) { try await phone.store.resolveConflict(conflict.id, keepingMine: ["body"]) }
        #expect(try await phone.store.conflicts().count == 1, "a refused choice changes nothing")
        await #expect(throws: StoreError.self) { try await phone.store.resolveConflict(conflict.id + 99, keepingMine: []) }
        // Keeping the server's copy whole.
        try await phone.store.resolveConflict(conflict.id, keepingMine: [])
        #expect(try await phone.store.conflicts().isEmpty)
        #expect(try await phone.store.get(Note.self, id)?.value.title == "Valve A")
    }
}
