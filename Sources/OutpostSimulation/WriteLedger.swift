public import Foundation
import OutpostCore

/// Everything a workload wrote on one device, as the person saw it succeed
/// locally. The invariant checker holds the system to it.
public struct WriteLedger: Sendable {
    public private(set) var created: Set<UUID> = []
    public private(set) var deleted: Set<UUID> = []
    /// Unique marks written by updates (`notes` = mark), by record.
    public private(set) var updateMarks: [(record: UUID, mark: String)] = []
    public var writeCount: Int { created.count + deleted.count + updateMarks.count }
    /// Records this device had created when another copy of its database
    /// came to be: a clone holds them too and may keep (and send) a record
    /// this device later deleted, after this device last heard from the
    /// server (docs/reliability.md, "What a copy cannot know").
    public private(set) var heldByAnotherCopy: Set<UUID> = []

    public init() {}

    public mutating func recordCreate(_ uuid: UUID) { created.insert(uuid) }
    public mutating func recordDelete(_ uuid: UUID) { deleted.insert(uuid) }
    /// Another copy of this device's database exists (a clone, on either side).
    public mutating func recordAnotherCopy(of records: Set<UUID>) { heldByAnotherCopy.formUnion(records) }
    public mutating func recordUpdate(_ uuid: UUID, mark: String) { updateMarks.append((uuid, mark)) }
}
