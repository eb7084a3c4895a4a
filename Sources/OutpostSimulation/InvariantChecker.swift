import Foundation
public import Outpost
import OutpostCore
public import OutpostServer

/// One broken invariant, with the records involved.
public struct Violation: Sendable, Equatable, CustomStringConvertible {
    /// `I1` … `I10` (docs/reliability.md lists them).
    public var invariant: String
    public var detail: String

    public var description: String { "\(invariant): \(detail)" }
}

/// A device as the checker sees it.
public struct CheckedDevice: Sendable {
    public var name: String
    public var store: LocalStore
    public var principal: Principal
    public var ledger: WriteLedger

    public init(name: String, store: LocalStore, principal: Principal, ledger: WriteLedger) {
        self.name = name
        self.store = store
        self.principal = principal
        self.ledger = ledger
    }
}

/// The result of a check: what was checked and what broke.
public struct InvariantReport: Sendable {
    public var violations: [Violation] = []
    /// How many facts each invariant was checked against.
    public var checks: [String: Int] = [:]

    public var isClean: Bool { violations.isEmpty }
}

/// Checks the invariants I1-I10 against the server's database and every
/// device's database, after quiescence (network healed, outboxes drained,
/// every device pulled last).
public enum InvariantChecker {
    /// I10: no device's pull cursor stands past the end of the server's
    /// feed. A server that lost its last commits (or was restored) must say
    /// so with a 410, after which the device downloads again; a device left
    /// past the end would silently miss every change until versions passed it.
    static func feedEndViolation(_ device: CheckedDevice, server: SyncServer) async throws -> Violation? {
        guard let cursor = try await device.store.pullState(collections: device.store.syncedCollections).cursor,
            let version = Simulation.decodeCursorVersion(cursor.rawValue)
        else { return nil }
        let newest = try server.newestFeedVersion()
        guard version > newest else { return nil }
        return Violation(
            invariant: "I10", detail: "\(device.name)'s cursor stands at version \(version), past the server's newest \(newest)")
    }

    public static func check(server: SyncServer, devices: [CheckedDevice], collections: [String] = ["people", "visits"])
        async throws -> InvariantReport
    {
        var report = InvariantReport()
        for device in devices {
            report.checks["I10", default: 0] += 1
            if let violation = try await feedEndViolation(device, server: server) { report.violations.append(violation) }
        }
        let serverRows = try server.database.read { sql in
            try sql.query("SELECT collection, uuid, deleted, owner, team, data FROM records", [])
        }
        struct ServerRow {
            var collection: String
            var deleted: Bool
            var owner: String
            var team: String
            var data: String?
        }
        var byUUID: [String: ServerRow] = [:]
        for row in serverRows {
            byUUID[row.string(1)] = ServerRow(
                collection: row.string(0), deleted: row.bool(2), owner: row.string(3), team: row.string(4),
                data: row.optionalString(5))
        }
        let results = try server.database.read { sql in
            try sql.query("SELECT user_id, client_id, mutation_id, result FROM mutation_results", [])
        }
        // I2: no mutation takes effect twice.
        var appliedIDs: [String: Int] = [:]
        var appliedTexts: [String] = []
        for row in results {
            let text = row.string(3)
            if text.contains(#""status":"applied""#) {
                appliedIDs[ResultIDs.text(row.values[2]), default: 0] += 1
                appliedTexts.append(text)
            }
        }
        // Every state each record had: push results keep the version they
        // wrote, not the record, so an applied edit is found in the version
        // it made (older versions' data is in history, the newest in records).
        var versionTexts: [String: [String]] = [:]
        for row in try server.database.read({ sql in
            try sql.query("SELECT uuid, data FROM record_history WHERE data IS NOT NULL", [])
        }) {
            versionTexts[row.string(0), default: []].append(row.string(1))
        }
        for (uuid, row) in byUUID { if let data = row.data { versionTexts[uuid, default: []].append(data) } }
        report.checks["I2", default: 0] += appliedIDs.count
        for (id, count) in appliedIDs where count > 1 {
            report.violations.append(Violation(invariant: "I2", detail: "mutation \(id) took effect \(count) times"))
        }

        // I9: every attachment a live record names is on the server whole,
        // hashing to its name.
        for (uuid, row) in byUUID where !row.deleted {
            guard let text = row.data, text.contains("sha256"), let data = try? JSONObject.parseObject(text) else { continue }
            for (field, attachment) in AttachedFile.all(in: data) {
                report.checks["I9", default: 0] += 1
                if try !server.holdsIntactBlob(attachment.sha256, size: attachment.size) {
                    report.violations.append(
                        Violation(
                            invariant: "I9",
                            detail: "\(row.collection) \(uuid) names in \(field) a blob \(attachment.sha256.prefix(12)) the server does not hold whole"))
                }
            }
        }

        for device in devices {
            let store = device.store
            // I9: no photo a device still needs was evicted, and every file holds its bytes.
            report.checks["I9", default: 0] += 1
            for problem in try await store.attachmentProblems() {
                report.violations.append(Violation(invariant: "I9", detail: "\(device.name): \(problem)"))
            }
            var rejected: Set<UUID> = []
            for record in try await store.rejectedRecords() { rejected.insert(record.uuid) }
            let conflictReports = try await store.conflicts()
            let conflictText = conflictReports.map { String(describing: $0.localChange ?? [:]) }.joined(separator: "\n")
            let held = Set(try await store.heldEntries().map(\.entry.record.uuid))

            // I6: the outbox drains (held children of a refused parent are visible, not stuck).
            let stuck = try await store.outboxEntries().filter { !held.contains($0.record.uuid) }
            report.checks["I6", default: 0] += 1
            if !stuck.isEmpty {
                report.violations.append(
                    Violation(
                        invariant: "I6",
                        detail: "\(device.name): \(stuck.count) outbox entries never drained, e.g. \(stuck[0].record) (\(stuck[0].op.rawValue), seq \(stuck[0].seq.map(String.init) ?? "none"))"))
            }

            // I8: no stopped device. With the network and the disks healed,
            // every change is on the server or visibly refused: no record is
            // left waiting, no queued change unreadable.
            for collection in collections where store.syncedCollections.contains(collection) {
                for record in try await store.query(RecordQuery(collection)) where !held.contains(record.uuid) {
                    report.checks["I8", default: 0] += 1
                    if record.syncState == .pending || record.syncState == .sending {
                        report.violations.append(
                            Violation(
                                invariant: "I8",
                                detail: "\(device.name): \(collection)/\(record.uuid.wireText) is still \(record.syncState.rawValue) after the network healed"))
                    }
                }
            }
            for damage in await store.damagedRows() {
                report.violations.append(Violation(invariant: "I8", detail: "\(device.name): \(damage)"))
            }

            // I1: every write is on the server or visibly refused.
            for uuid in device.ledger.created where !device.ledger.deleted.contains(uuid) {
                report.checks["I1", default: 0] += 1
                let onServer = byUUID[uuid.wireText].map { !$0.deleted } ?? false
                let deletedByOthers = byUUID[uuid.wireText]?.deleted == true
                if !onServer && !deletedByOthers && !rejected.contains(uuid) && !held.contains(uuid) {
                    report.violations.append(
                        Violation(invariant: "I1", detail: "\(device.name): record \(uuid.wireText) was created but is not on the server"))
                }
            }

            // I3: nothing deleted comes back, on the server or any device.
            // A delete that lost to a concurrent edit (server_wins) did not
            // happen, and the person was told: that is I4's business.
            let refusedDeletes = Set(conflictReports.filter { $0.op == .delete }.map(\.record.uuid)).union(rejected)
            for uuid in device.ledger.deleted where !refusedDeletes.contains(uuid) && !device.ledger.heldByAnotherCopy.contains(uuid) {
                report.checks["I3", default: 0] += 1
                if let row = byUUID[uuid.wireText], !row.deleted {
                    report.violations.append(
                        Violation(invariant: "I3", detail: "\(device.name) deleted \(uuid.wireText) but it is live on the server"))
                }
                for other in devices {
                    for collection in collections where other.store.syncedCollections.contains(collection) {
                        guard try await other.store.get(in: collection, uuid) != nil else { continue }
                        report.violations.append(
                            Violation(invariant: "I3", detail: "\(device.name) deleted \(uuid.wireText) but it is back on \(other.name)"))
                    }
                }
            }

            // I4: an edit that did not take effect is reported.
            let marks = device.ledger.updateMarks
            for (position, (uuid, mark)) in marks.enumerated() {
                // The person's own later edit of the field replaces this one
                // (merged in the outbox before sending): not a lost update.
                if marks[(position + 1)...].contains(where: { $0.record == uuid }) { continue }
                report.checks["I4", default: 0] += 1
                let applied =
                    versionTexts[uuid.wireText]?.contains { $0.contains(mark) } == true || appliedTexts.contains { $0.contains(mark) }
                let reported = conflictText.contains(mark) || rejected.contains(uuid) || held.contains(uuid)
                let recordGone = device.ledger.deleted.contains(uuid) || byUUID[uuid.wireText]?.deleted == true
                if !applied && !reported && !recordGone {
                    report.violations.append(
                        Violation(
                            invariant: "I4", detail: "\(device.name): the edit \(mark) of \(uuid.wireText) was lost without a conflict report"))
                }
            }

            // I5 and I7: the device shows exactly the server's state for its scope, and nothing outside it.
            let scope = { (row: ServerRow) -> Bool in
                switch device.principal.role {
                case .admin: return true
                case .field: return row.owner == device.principal.user
                case .coordinator: return row.team == device.principal.team
                }
            }
            let mode = try await store.metadata("scope.mode")
            let window = try await store.metadata("scope.window_start")
            for collection in collections where store.syncedCollections.contains(collection) {
                let local = try await store.query(RecordQuery(collection))
                var localByUUID: [String: JSONRecord] = [:]
                for record in local { localByUUID[record.uuid.wireText] = record }
                for record in local {
                    report.checks["I7", default: 0] += 1
                    guard let row = byUUID[record.uuid.wireText] else {
                        if record.syncState == .synced {
                            report.violations.append(
                                Violation(invariant: "I5", detail: "\(device.name) holds \(record.uuid.wireText), which the server does not have"))
                        }
                        continue
                    }
                    if !scope(row) {
                        report.violations.append(
                            Violation(invariant: "I7", detail: "\(device.name) (\(device.principal.user)) holds \(record.uuid.wireText) of \(row.owner)/\(row.team)"))
                    }
                    if record.syncState == .synced, row.deleted {
                        report.violations.append(
                            Violation(invariant: "I5", detail: "\(device.name) shows \(record.uuid.wireText), deleted on the server"))
                    } else if record.syncState == .synced, let text = row.data,
                        let serverData = try? JSONObject.parseObject(text), serverData != record.value
                    {
                        report.violations.append(
                            Violation(invariant: "I5", detail: "\(device.name) shows another version of \(record.uuid.wireText) than the server"))
                    }
                }
                // Everything in scope is on a full-mode device.
                guard mode == nil || mode == ScopeMode.full.rawValue, window == nil else { continue }
                for (uuid, row) in byUUID where row.collection == collection && !row.deleted && scope(row) {
                    report.checks["I5", default: 0] += 1
                    if localByUUID[uuid] == nil {
                        report.violations.append(
                            Violation(invariant: "I5", detail: "\(device.name) is missing \(uuid) that is in its scope on the server"))
                    }
                }
            }
        }
        return report
    }
}
