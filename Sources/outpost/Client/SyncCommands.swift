import Foundation
import Outpost
import OutpostCore

/// `sync`, `status`, `conflicts`.
enum SyncCommands {
    static let help = """
        Usage: outpost sync [--timeout SECONDS] [--profile NAME]
               outpost status [--profile NAME]
               outpost conflicts [--profile NAME]

        sync       sends unsent changes, then downloads what changed (a progress bar on a
                   terminal), and prints what happened.
        status     the connection, unsent / refused counts, how current the data is, what is
                   downloaded and what is not, and conflicts.
        conflicts  edits that lost to a newer server copy, with the values you had typed.
        """

    static func sync(_ words: [String]) async throws {
        var arguments = try Arguments(words)
        let profile = try Profile.from(&arguments)
        let timeout = try arguments.integer("timeout", in: 1...3600) ?? 60
        try arguments.checkAllUsed()
        guard arguments.positional.isEmpty else { throw UsageError("sync takes no words, only options.") }
        let account = try profile.loadAccount()
        try await profile.withStore { store in
            let engine = try profile.engine(store: store, account: account)
            let bar = ProgressBar()
            let updates = await engine.statusUpdates()
            let watcher = Task {
                for await status in updates {
                    if let progress = status.progress, status.isSyncing { bar.show(progress) }
                }
            }
            defer {
                watcher.cancel()
                bar.finish()
            }
            do {
                let report = try await syncRetryingWhileBusy(engine, within: .seconds(timeout))
                bar.finish()
                var parts = ["sent \(report.sent)", "confirmed \(report.confirmed)"]
                if report.duplicates > 0 { parts[1] += " (\(report.duplicates) already on the server)" }
                parts += ["conflicts \(report.conflicts.count)", "rejected \(report.rejected.count)", "received \(report.received)"]
                if report.deleted > 0 { parts.append("removed \(report.deleted)") }
                if report.attachmentsUploaded > 0 { parts.append("attachments uploaded \(report.attachmentsUploaded)") }
                print("Synced: " + parts.joined(separator: ", ") + ".")
                for rejected in report.rejected {
                    let problems = rejected.rejection.errors.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
                    print("  refused: \(rejected.record) — \(problems.isEmpty ? rejected.rejection.code : problems.joined(separator: "; "))")
                }
                for held in report.held {
                    print("  waiting: \(held.entry.record) until its parent \(held.refusedParent) is fixed")
                }
                if !report.conflicts.isEmpty { print("  run 'outpost conflicts' to see the edits that lost.") }
            } catch let failure as SyncFailure {
                bar.finish()
                if failure == .offline, let reason = await profile.unreachableReason(account) { throw CommandFailure(reason) }
                throw CommandFailure(StatusMessage.text(for: await engine.currentStatus) + " (" + describe(failure) + ")")
            }
        }
    }

    /// One sync, tried again while the server says "not now" and the
    /// timeout leaves room: a proxy answers 502 or 504 while the servers
    /// behind it restart, for seconds; giving up at the first of them left
    /// changes unconfirmed that the next try would have sent.
    static func syncRetryingWhileBusy(_ engine: SyncEngine, within timeout: Duration) async throws -> SyncReport {
        let deadline = ContinuousClock.now + timeout
        var wait = Duration.seconds(1)
        // Every cycle from here on is this sync's: a push confirmed before the
        // pull met the busy server, or a change the engine's own retry sent
        // while this one waited, is said in the end too.
        let mark = await engine.endedCycles
        while true {
            do {
                let report = try await engine.sync(timeout: deadline - ContinuousClock.now)
                guard var whole = await engine.reportOfCycles(after: mark) else { return report }
                whole.failure = nil
                return whole
            } catch SyncFailure.serverBusy(let retryAfter) {
                let pause = retryAfter.map { Duration.seconds($0) } ?? wait
                guard ContinuousClock.now + pause < deadline else { throw SyncFailure.serverBusy(retryAfter: retryAfter) }
                Terminal.note("The server is busy or restarting; trying again in \(pause.components.seconds) s.")
                try await Task.sleep(for: pause)
                wait = min(wait * 2, .seconds(8))
            }
        }
    }

    static func describe(_ failure: SyncFailure) -> String {
        switch failure {
        case .offline: return "the server could not be reached"
        case .noAnswer: return "the server did not answer in time; changes will be checked on the next sync"
        case .serverBusy: return "the server is busy; try again shortly"
        case .signInRequired: return "sign in again with 'outpost login'"
        case .accessRevoked: return "access was withdrawn"
        case .refused(let body): return body.message
        case .invalidAnswer(let detail): return "the server's answer could not be read (\(detail))"
        case .localStorage(let detail): return "this device's storage failed: \(detail)"
        case .timedOut: return "the sync goes on taking longer than the timeout"
        case .credentialsUnavailable(let detail): return "no token could be had now (\(detail))"
        case .updateRequired: return "the server asks for a newer version of this program"
        }
    }

    static func status(_ words: [String]) async throws {
        var arguments = try Arguments(words)
        let profile = try Profile.from(&arguments)
        try arguments.checkAllUsed()
        guard arguments.positional.isEmpty else { throw UsageError("status takes no words, only options.") }
        let account = try profile.loadAccount()
        try await profile.withStore { store in
            let engine = try profile.engine(store: store, account: account, timeout: 5)
            let connectivity = await engine.checkConnectivity()
            let status = await engine.currentStatus
            print("Account:      \(account.user) (\(account.role.rawValue), team \(account.team)) on \(account.server)")
            print("Connection:   \(connectivity.rawValue)")
            print("Changes:      \(status.pending) waiting, \(status.awaitingConfirmation) being checked, \(status.rejected) refused, \(status.held) held")
            if let updated = status.dataUpdatedAt?.date {
                print("Data:         updated on \(StatusMessage.describe(updated, timeZone: .current, locale: Locale(identifier: "en_GB"))) (server time)")
            } else {
                print("Data:         never downloaded")
            }
            let mode = try await store.metadata("scope.mode").flatMap(ScopeMode.init(rawValue:))
            let window = try await store.metadata("scope.window_start")
            for (collection, coverage) in status.coverage.sorted(by: { $0.key < $1.key }) {
                var line = "\(coverage.onDevice) on this computer"
                switch collection == "catalogs" ? .full : (mode ?? .full) {
                case .full: line += mode == nil && collection != "catalogs" ? " (not downloaded yet)" : ", everything in your scope"
                case .capped: line += window.map { ", records since \(String($0.prefix(10))); older ones are searched online" } ?? ", everything in your scope"
                case .onlineWithCache: line += " (opened records only; search runs on the server)"
                }
                print("  \(collection.padding(toLength: 10, withPad: " ", startingAt: 0))  \(line)")
            }
            print("Conflicts:    \(status.conflicts)")
            let attachments = status.attachments
            print("Attachments:  \(attachments.waiting) waiting (\(attachments.bytesWaiting) bytes), \(attachments.failed) refused, \(attachments.bytesOnDevice) bytes on this computer")
            print("")
            print(StatusMessage.text(for: status))
            if let line = StatusMessage.attachmentText(for: status) { print(line) }
        }
    }

    static func conflicts(_ words: [String]) async throws {
        var arguments = try Arguments(words)
        let profile = try Profile.from(&arguments)
        try arguments.checkAllUsed()
        _ = try profile.loadAccount()
        try await profile.withStore { store in
            let reports = try await store.conflicts()
            if reports.isEmpty {
                print("No conflicts.")
                return
            }
            for report in reports {
                let lost = (try? report.localChange?.jsonText()) ?? "(a delete)"
                let kept = report.serverRecord.map { record in
                    record.deleted ? "deleted on the server" : (try? record.data?.jsonText()) ?? ""
                } ?? "no longer on the server"
                let both = report.fields.isEmpty ? "" : " (changed on both sides: \(report.fields.joined(separator: ", ")))"
                print("\(report.record): your \(report.op.rawValue) \(lost) lost to the server's copy \(kept)\(both)")
            }
        }
    }
}

/// A one-line progress bar on stderr, only on a terminal.
final class ProgressBar: Sendable {
    private let shown = Locked(false)
    private let enabled = isatty(STDERR_FILENO) == 1

    func show(_ progress: SyncProgress) {
        guard enabled, progress.total > 0 else { return }
        let width = 30
        let filled = Int(progress.fraction * Double(width))
        let line = "\rDownloading [" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
            + "] \(progress.done)/\(progress.total)"
        shown.withLock { $0 = true }
        FileHandle.standardError.write(Data(line.utf8))
    }

    func finish() {
        let wasShown = shown.withLock { shown -> Bool in
            defer { shown = false }
            return shown
        }
        if wasShown { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}
