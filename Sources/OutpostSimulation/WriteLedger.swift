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
    /// Records this device had created when its database was copied to a
    /// clone: the clone holds them too and may keep (and send) a record
    /// this device later deleted, which is the clone's own doing.
    public private(set) var copiedToAClone: Set<UUID> = []

    public init() {}

    public mutating func recordCreate(_ uuid: UUID) { created.insert(uuid) }
    public mutating func recordDelete(_ uuid: UUID) { deleted.insert(uuid) }
    /// This device's database was copied (either side of the copy).
    public mutating func recordClone(of records: Set<UUID>) { copiedToAClone.formUnion(records) }
    public mutating func recordUpdate(_ uuid: UUID, mark: String) { updateMarks.append((uuid, mark)) }
}
