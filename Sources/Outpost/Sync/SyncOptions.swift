public import Foundation

/// How much of the scope a device keeps offline.
public enum ScopeMode: String, Sendable, Equatable, Codable {
    /// Everything in scope is downloaded (field users).
    case full
    /// Above the cap, only the last months by the window field are
    /// downloaded; the rest is searched online (coordinators).
    case capped
    /// Nothing is downloaded in bulk: opened records are cached, search runs
    /// on the server (administrators). Capture works offline all the same.
    case onlineWithCache = "online_with_cache"
}

/// How the sync engine behaves. Every field has a documented default.
public struct SyncOptions: Sendable {
    /// Past this, a request's outcome is unknown. Default 20 s.
    public var requestTimeout: TimeInterval = 20
    /// The app's data schema version, sent as `Outpost-Schema` on every
    /// request. Raise it when the record types change in a way older
    /// servers' rules would not accept; a server that needs a newer one
    /// answers 426 and the status asks the person to update the app.
    public var schemaVersion: Int?
    /// Who is calling, as `app-id/app-version` (`Outpost-Client`), e.g.
    /// `"org.example.field/2.3.1"`: the server keeps the last one seen per client.
    public var clientName: String?
    /// Mutations per push (the server takes at most 500). Default 200.
    public var pushBatchSize = 200
    /// Most bytes of mutation text in one push; kept well under the server's
    /// body limit (4 MiB by default), which refuses a larger request whole.
    public var pushBatchBytes = 1_048_576
    /// How long one cycle uploads attachments before it moves on to the
    /// pull (the rest continues in a follow-up cycle, resumed where it
    /// stopped). Default 30 s.
    public var attachmentUploadTime: Duration = .seconds(30)
    /// Attachments uploaded at the same time (each on its own connection).
    /// Default 1: on Linux two URLSession uploads at once took 1.8× as
    /// long as the same uploads one after the other (`outpost bench
    /// attachments`); a link with a long round trip may gain from 2.
    public var attachmentUploadsAtOnce = 1
    /// Records per pull page (a server serves at most 5,000). Default
    /// 5,000: a page's cursor comes from the page before, so a download
    /// waits a round trip per page; on a mobile link (10 Mbit/s, 50 ms) a
    /// page of 1,000 records crosses in less than that round trip, and a
    /// first download of 235,613 records took 1.86x its bytes at link speed
    /// against 1.08x with pages of 5,000 (docs/benchmarks.md).
    public var pullPageSize = 5000
    /// Backoff and retry budget.
    public var retry = RetryPolicy()
    /// A sync every so often while the app runs; nil for none. Default 5 minutes.
    public var periodicInterval: Duration? = .seconds(300)
    /// Refreshes after a reconnection start at a random moment within this
    /// window, so a thousand devices do not call at once. Default 5 s.
    public var reconnectJitter: Duration = .seconds(5)
    /// nil chooses by role: field → full, coordinator → capped, admin → online with cache.
    public var scopeMode: ScopeMode?
    /// Rows above which a capped device downloads only the window. Default 5,000.
    public var capRows: Int64 = 5000
    /// How far back a capped download reaches. Default 365 days.
    public var capWindow: TimeInterval = 365 * 86_400
    /// Keep a live channel while started, online and in the foreground:
    /// other people's changes arrive as they commit. Default on.
    public var liveUpdates = true
    /// How often the server sends a heartbeat on a live stream (its
    /// `heartbeat_seconds`, 15 s by default): no byte for two of these and
    /// the channel is taken for dead.
    public var liveHeartbeat: Duration = .seconds(15)
    /// How long a new stream may take to deliver its first event. Past it
    /// the engine asks a plain pull: answered within half this time, twice
    /// in a row, something in between buffers streams (a proxy) and the
    /// engine long-polls that server instead; not answered, the server is
    /// busy and the stream is tried again after a backoff. Default 10 s.
    public var liveFirstEventLimit: Duration = .seconds(10)
    /// How long one long poll waits on the server (at most 60 s). Default 25 s.
    public var longPollWait = 25
    /// While the live channel is up, the periodic sync runs this rarely:
    /// the channel already brings every change; the periodic sync stays
    /// as the safety net. Default 30 minutes.
    public var periodicIntervalWhileLive: Duration = .seconds(1800)
    /// Keeps the live channel after each cycle though ``SyncEngine/start()``
    /// was never called: the simulation runs every cycle by hand and still
    /// wants the channel between them.
    package var liveWithoutStart = false
    /// How long the answer to a push waits, before it is read and settled,
    /// for the push sent on its head to get its body out (see
    /// `SyncEngine.pushPhase`). Longer than reading and settling a full
    /// batch takes (5-10 ms here): past that the network, not the core, is
    /// what the body waits for, and the settling would only lag behind.
    package var bodyOutWait: Duration = .milliseconds(20)

    /// Creates options with every field at its default.
    public init() {}
}

/// What started a sync cycle.
public enum SyncTrigger: String, Sendable, Equatable, Codable {
    /// The engine was started with `start()`.
    case launch
    /// The network came back after a disconnection.
    case connectivityRegained = "connectivity_regained"
    /// The app came back to the foreground (`enteredForeground()`).
    case foreground
    /// Pull-to-refresh: skips backoff waits, never in-flight exclusion.
    case manual
    /// The periodic timer set by `periodicInterval` fired.
    case periodic
    /// A retry after a backoff wait.
    case retry
    /// New local changes to send.
    case localChange = "local_change"
    /// The live channel met something only a full sync handles (a refused
    /// token, a needed re-download).
    case liveChannel = "live_channel"
}

extension SyncOptions {
    /// The headers that say which app and schema version is calling.
    var identityHeaders: [String: String] {
        var headers: [String: String] = [:]
        if let schemaVersion { headers["Outpost-Schema"] = String(schemaVersion) }
        if let clientName { headers["Outpost-Client"] = clientName }
        return headers
    }
}
