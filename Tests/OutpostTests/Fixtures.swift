import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

struct Person: SyncRecord, Equatable {
    static let collection = "people"
    static let indexedFields = ["name"]
    var name: String
    var phone: String?
    var section: Int?
}

struct Visit: SyncRecord, Equatable {
    static let collection = "visits"
    static let references = ["person": "people"]
    var person: String
    var visitedAt: String
    var notes: String?

    enum CodingKeys: String, CodingKey {
        case person, notes
        case visitedAt = "visited_at"
    }
}

/// A real store in a fresh temporary folder, with a manual clock and seeded ids.
final class StoreFixture: Sendable {
    let directory: TemporaryDirectory
    let clock = ManualWallClock()
    let path: String
    let store: LocalStore

    static let collections = [Person.descriptor, Visit.descriptor]

    init(seed: UInt64 = 1) throws {
        directory = try TemporaryDirectory()
        path = directory.path("device.sqlite")
        store = try LocalStore(
            path: path, collections: Self.collections, clock: clock, ids: UUIDv7Generator.seeded(seed, clock: clock))
    }

    /// Opens the same database again, as an app does after being killed.
    func reopen(seed: UInt64 = 2) throws -> LocalStore {
        try LocalStore(
            path: path, collections: Self.collections, clock: clock, ids: UUIDv7Generator.seeded(seed, clock: clock))
    }
}

/// Stands in for the server's answers in outbox tests: every mutation gets
/// the status the test asks for, and applied writes get increasing versions.
/// (The protocol tests against a live server live with the server.)
final class ScriptedServer: @unchecked Sendable {
    // @unchecked Sendable: used from one test task at a time.
    var version: Int64 = 100
    var nextID: Int64 = 1
    var records: [UUID: WireRecord] = [:]
    let time = ServerTimestamp(rawValue: "2026-11-29T10:00:00.123456Z")

    func record(for mutation: Mutation) -> WireRecord {
        version += 1
        var record =
            records[mutation.uuid]
            ?? WireRecord(
                collection: mutation.collection, uuid: mutation.uuid, id: nextID, version: version, updatedAt: time,
                deleted: false, owner: "u-1", team: "t-1", data: [:])
        if records[mutation.uuid] == nil { nextID += 1 }
        record.version = version
        switch mutation.op {
        case .create: record.data = mutation.data
        case .update: record.data = (record.data ?? [:]).applyingPatch(mutation.data ?? [:])
        case .delete:
            record.deleted = true
            record.data = nil
        }
        records[mutation.uuid] = record
        return record
    }

    /// Answers every mutation of the batch with `status` (applied writes change state).
    func answer(_ batch: PushBatch, _ status: (Mutation) -> MutationStatus = { _ in .applied }) -> PushResponse {
        let results = batch.request.mutations.map { mutation -> MutationResult in
            switch status(mutation) {
            case .applied:
                return MutationResult(seq: mutation.seq, id: mutation.id, status: .applied, record: record(for: mutation))
            case .rejected:
                return MutationResult(
                    seq: mutation.seq, id: mutation.id, status: .rejected, code: "invalid_field",
                    errors: ["name": "is required"])
            case .conflict:
                return MutationResult(seq: mutation.seq, id: mutation.id, status: .conflict, record: records[mutation.uuid])
            case let other:
                return MutationResult(seq: mutation.seq, id: mutation.id, status: other, record: records[mutation.uuid])
            }
        }
        return PushResponse(results: results, lastSeq: batch.request.mutations.last?.seq ?? 0, serverTime: time)
    }

    /// Someone else edits the record on the server.
    func editElsewhere(_ uuid: UUID, _ patch: JSONObject) {
        guard var record = records[uuid] else { return }
        version += 1
        record.version = version
        record.data = (record.data ?? [:]).applyingPatch(patch)
        records[uuid] = record
    }
}

extension LocalStore {
    /// Takes a batch and settles it with the scripted server's answers.
    @discardableResult
    func pushAll(to server: ScriptedServer, _ status: @escaping (Mutation) -> MutationStatus = { _ in .applied })
        async throws -> PushSettlement?
    {
        guard let batch = try takePushBatch() else { return nil }
        return try settle(batch, with: server.answer(batch, status))
    }
}
