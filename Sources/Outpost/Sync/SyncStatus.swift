public import Foundation
public import OutpostCore

/// Exact progress of a download: rows done out of rows the server said it would send.
public struct SyncProgress: Sendable, Equatable {
    /// Rows downloaded so far.
    public var done: Int64
    /// Rows the server said it would send.
    public var total: Int64

    /// Creates a progress of `done` rows out of `total`.
    public init(done: Int64, total: Int64) {
        self.done = done
        self.total = total
    }

    /// The share done, from 0 to 1; 0 when the total is zero.
    public var fraction: Double { total > 0 ? min(1, Double(done) / Double(total)) : 0 }
}

/// What is on the device for one collection, and what is not.
public struct CollectionCoverage: Sendable, Equatable {
    /// How much of this collection the device keeps offline.
    public var mode: ScopeMode
    /// Records on the device.
    public var onDevice: Int
    /// Records the server holds for this person, when known.
    public var inScope: Int64?
    /// For a capped download: records older than this are searched online.
    public var windowStart: ServerTimestamp?

    /// Whether everything in scope is on the device.
    public var isComplete: Bool { mode == .full || (mode == .capped && windowStart == nil) }
}

/// A snapshot of sync for the UI. `Sendable` and `Equatable`, so
/// a view can diff it; ``SyncEngine/statusUpdates()`` streams it.
public struct SyncStatus: Sendable, Equatable {
    /// What the network can do now; changes with OS hints and request outcomes.
    public var connectivity: ConnectivityState = .unknown
    /// Changes never sent yet.
    public var pending = 0
    /// Changes in the request on its way now.
    public var sending = 0
    /// Changes sent before whose outcome is being checked.
    public var awaitingConfirmation = 0
    /// When the oldest change still to be confirmed was made (the device's
    /// clock), or nil when every change is confirmed: "not sent since 9:14".
    public var oldestUnsentAt: Date?
    /// Records the server refused; each shows its field errors.
    public var rejected = 0
    /// Children waiting because their parent was refused.
    public var held = 0
    /// Edits that lost to a newer server copy, kept for the person.
    public var conflicts = 0
    /// Each collection's last complete sync, in server time (never the device clock).
    public var lastSyncedAt: [String: ServerTimestamp] = [:]
    /// Whether a first sync has completed; nil while that is not known yet.
    public var hasSynced: Bool?
    /// Whether a sync cycle is running now.
    public var isSyncing = false
    /// Download progress of a full download, when one is under way.
    public var progress: SyncProgress?
    /// What is on the device for each collection, keyed by collection name.
    public var coverage: [String: CollectionCoverage] = [:]
    /// Why the last cycle failed; cleared when a cycle completes.
    public var lastError: SyncFailure?
    /// The session expired: server calls wait for a new token; capture goes on.
    public var signInRequired = false
    /// The server no longer accepts changes from this version of the app
    /// (`426 upgrade_required`): capture goes on and is kept; sending waits
    /// for an update.
    public var updateRequired = false
    /// The live channel: off, connecting, live (a stream) or polling (a
    /// long poll, where a proxy buffers streams).
    public var live: LiveChannelState = .off
    /// The server's time of the last event the live channel received.
    public var lastLiveEventAt: ServerTimestamp?
    /// Attachments waiting to upload (files, bytes, progress) and refused ones.
    public var attachments = AttachmentSummary()
    /// Whether attachments are being uploaded now.
    public var isUploadingAttachments = false

    /// Creates the status shown before the engine reports anything.
    public init() {}

    /// Changes not yet confirmed by the server.
    public var unsent: Int { pending + sending + awaitingConfirmation }

    /// The oldest of the collections' last syncs: how current the data shown is.
    public var dataUpdatedAt: ServerTimestamp? { lastSyncedAt.values.min() }
}

/// How the device hears about other people's changes.
public enum LiveChannelState: String, Sendable, Equatable, Codable {
    /// No live channel: in the background, stopped, signed out, offline,
    /// or turned off in the options. Changes arrive at the next sync.
    case off
    /// Opening (or reopening) the channel.
    case connecting
    /// A stream is open: changes arrive as they commit.
    case live
    /// Streams do not get through here (a buffering proxy): the device asks
    /// every few seconds with long polls instead.
    case polling
}
