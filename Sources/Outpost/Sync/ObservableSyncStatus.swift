#if canImport(Observation)
public import Observation

/// The sync status as an `@Observable` object for SwiftUI: views read
/// `status` and redraw when it changes.
///
/// ```swift
/// @State private var sync = ObservableSyncStatus()
/// var body: some View {
///     Text(StatusMessage.text(for: sync.status)).task { await sync.follow(engine) }
/// }
/// ```
@MainActor
@Observable
public final class ObservableSyncStatus {
    /// The latest sync status; updated on the main actor while `follow(_:)` runs.
    public private(set) var status = SyncStatus()

    /// Creates an object holding an empty status until `follow(_:)` is called.
    public init() {}

    /// Mirrors the engine's status until the calling task is cancelled.
    public func follow(_ engine: SyncEngine) async {
        for await next in await engine.statusUpdates() {
            status = next
        }
    }
}
#endif
