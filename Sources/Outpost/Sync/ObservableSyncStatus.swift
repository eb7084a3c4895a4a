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
    public private(set) var status = SyncStatus()

    public init() {}

    /// Mirrors the engine's status until the calling task is cancelled.
    public func follow(_ engine: SyncEngine) async {
        for await next in await engine.statusUpdates() {
            status = next
        }
    }
}
#endif
