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

    public init() {}

    public mutating func recordCreate(_ uuid: UUID) { created.insert(uuid) }
    public mutating func recordDelete(_ uuid: UUID) { deleted.insert(uuid) }
    public mutating func recordUpdate(_ uuid: UUID, mark: String) { updateMarks.append((uuid, mark)) }
}
