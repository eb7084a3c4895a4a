import Foundation
import Outpost
import OutpostCore

/// `outpost watch`: keeps the live channel and prints each change as it is
/// stored, an operator's tail of what others write.
enum WatchCommand {
    static let help = """
        Usage: outpost watch [COLLECTION…] [--profile NAME]

        Syncs once, then keeps a live channel to the server and prints one line per change
        as it is stored on this computer: the server's time, the collection, the record's
        uuid, and its fields now (or "deleted" / "left your scope"). Only the named
        collections when some are given. Runs until interrupted (Ctrl-C). What the channel
        is doing (live, connecting, long polls through a proxy) goes to stderr.
        """

    static func run(_ words: [String]) async throws {
        var arguments = try Arguments(words)
        let profile = try Profile.from(&arguments)
        try arguments.checkAllUsed()
        let known = Set(profile.collections.map(\.name))
        let wanted = Set(arguments.positional)
        if let unknown = wanted.subtracting(known).sorted().first {
            throw UsageError("'\(unknown)' is not a collection here; choose from \(known.sorted().joined(separator: ", ")).")
        }
        let account = try profile.loadAccount()
        try await profile.withStore { store in
            let engine = try profile.engine(store: store, account: account, live: true)
            let events = await engine.events()
            let statuses = await engine.statusUpdates()
            let printer = Task {
                for await event in events {
                    guard case .received(let changes) = event else { continue }
                    // Written at once, unbuffered: a pipe reader sees each line as it happens.
                    for change in changes where wanted.isEmpty || wanted.contains(change.collection) {
                        FileHandle.standardOutput.write(Data((line(for: change) + "\n").utf8))
                    }
                }
            }
            let reporter = Task {
                var last: LiveChannelState?
                for await status in statuses where status.live != last {
                    last = status.live
                    Terminal.note(StatusMessage.liveText(for: status))
                }
            }
            await engine.start()
            await ServeCommand.waitForTermination()
            await engine.stop()
            printer.cancel()
            reporter.cancel()
        }
    }

    /// `2026-12-01T10:00:01.000100Z people 0190a3c5-… name="Ana" phone="555"`.
    static func line(for change: ReceivedChange) -> String {
        let time = change.serverUpdatedAt?.rawValue ?? ServerTimestamp(Date()).rawValue
        let what: String
        if change.removed {
            what = "left your scope"
        } else if change.deleted {
            what = "deleted"
        } else {
            what = (change.data ?? [:]).sorted { $0.key < $1.key }.map { key, value in
                "\(key)=\((try? value.jsonText()) ?? "?")"
            }.joined(separator: " ")
        }
        return "\(time) \(change.collection) \(change.uuid.wireText) \(what)"
    }
}
