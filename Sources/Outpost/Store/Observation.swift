public import Foundation
import OutpostCore
import OutpostSQLite

/// A live read: re-run after each commit that touched what it reads, and
/// delivered only when its result changed.
struct StoreObserver {
    /// The collections the read depends on; nil for a read across the
    /// store (conflicts, refused and held changes), re-run after any commit.
    let collections: Set<String>?
    let refresh: () -> Void
    let finish: () -> Void

    /// What a dismissed conflict touches: only store-wide reads care.
    static let conflictsKey = "\u{0}conflicts"
}

/// The last value a live read delivered, to leave out repeats.
private final class LastDelivered<Value: Equatable> {
    var value: Value?
}

extension LocalStore {
    /// An async sequence of a query's results: the current value is ready
    /// for the first `next()` (it is read before this returns), then one
    /// value after each commit that touched the collection and changed the
    /// result. Values are coalesced (a slow consumer sees the newest, never
    /// a backlog); the sequence ends when the consumer stops or the store
    /// closes.
    public func observe(_ query: RecordQuery) -> AsyncThrowingStream<[JSONRecord], any Error> {
        observe(reading: [query.collection], checking: query.collection, { try $0.tables.query(query) }) { $0 }
    }

    /// Typed observation of a collection: see ``observe(_:)-(RecordQuery)``.
    public func observe<T: SyncRecord>(
        _ type: T.Type, where filter: FieldFilter<T>? = nil, orderBy order: [FieldOrder<T>] = [], limit: Int? = nil
    ) -> AsyncThrowingStream<[LocalRecord<T>], any Error> {
        // A query that cannot be built ends the sequence with the reason.
        let query = Result { try RecordQuery(T.self, filter: filter, order: order, limit: limit) }
        return observe(reading: [T.collection], checking: T.collection, { try $0.tables.query(try query.get()) }) { records in
            try records.map { record in try record.map { try RecordCoding.value(T.self, from: $0) } }
        }
    }

    /// One record as it changes: nil while it does not exist (or once deleted).
    public func observe<T: SyncRecord>(_ type: T.Type, _ uuid: UUID) -> AsyncThrowingStream<LocalRecord<T>?, any Error> {
        observe(reading: [T.collection], checking: T.collection, { (store: isolated LocalStore) -> JSONRecord? in
            guard let row = try store.tables.load(T.collection, uuid), !row.deleted else { return nil }
            return row.localRecord(row.data)
        }) { record in try record.map { record in try record.map { try RecordCoding.value(T.self, from: $0) } } }
    }

    /// How many records of a collection match a filter, as it changes.
    public func observeCount<T: SyncRecord>(_ type: T.Type, where filter: FieldFilter<T>? = nil) -> AsyncThrowingStream<Int, any Error> {
        let query = Result { try RecordQuery(T.self, filter: filter, order: [], limit: nil) }
        return observe(reading: [T.collection], checking: T.collection, { try $0.tables.query(try query.get()).count }) { $0 }
    }

    /// Edits that lost to a newer server copy (``conflicts()``), as they come and go.
    public func observeConflicts() -> AsyncThrowingStream<[ConflictReport], any Error> {
        observe(reading: nil, checking: nil, { try $0.conflicts() }) { $0 }
    }

    /// Records whose last change the server refused (``rejectedRecords()``), as they come and go.
    public func observeRejected() -> AsyncThrowingStream<[JSONRecord], any Error> {
        observe(reading: nil, checking: nil, { try $0.rejectedRecords() }) { $0 }
    }

    /// Changes held behind a refused parent (``heldEntries()``), as they come and go.
    public func observeHeld() -> AsyncThrowingStream<[HeldEntry], any Error> {
        observe(reading: nil, checking: nil, { try $0.heldEntries() }) { $0 }
    }

    private func observe<Raw: Equatable, Element: Sendable>(
        reading collections: Set<String>?, checking collection: String?, _ read: @escaping @Sendable (isolated LocalStore) throws -> Raw,
        transform: @escaping @Sendable (Raw) throws -> Element
    ) -> AsyncThrowingStream<Element, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: Element.self, throwing: (any Error).self, bufferingPolicy: .bufferingNewest(1))
        if isClosed {
            continuation.finish(throwing: StoreError.closed)
            return stream
        }
        do {
            if let collection { _ = try registry.descriptor(collection) }
        } catch {
            continuation.finish(throwing: error)
            return stream
        }
        let id = UUID()
        let last = LastDelivered<Raw>()
        let observer = StoreObserver(
            collections: collections,
            refresh: { [unowned self] in
                do {
                    let raw = try read(self)
                    // A commit that left the result as it was sends nothing.
                    guard raw != last.value else { return }
                    last.value = raw
                    continuation.yield(try transform(raw))
                } catch {
                    continuation.finish(throwing: error)
                }
            },
            finish: { continuation.finish() })
        observers[id] = observer
        watchOtherProcessesWhileObserved()
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            Task { await self.removeObserver(id) }
        }
        // Read now, on the store: the first `next()` finds it waiting.
        observer.refresh()
        return stream
    }

    /// One element after each committed local write (coalesced): the sync
    /// engine listens to send new changes soon.
    public func localChanges() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        if isClosed {
            continuation.finish()
            return stream
        }
        let id = UUID()
        localChangeContinuations[id] = continuation
        watchOtherProcessesWhileObserved()
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            Task { await self.removeLocalChangeListener(id) }
        }
        return stream
    }

    private func removeLocalChangeListener(_ id: UUID) {
        localChangeContinuations.removeValue(forKey: id)
        watchOtherProcessesWhileObserved()
    }

    private func removeObserver(_ id: UUID) {
        observers.removeValue(forKey: id)
        watchOtherProcessesWhileObserved()
    }

    /// Looks for other processes' commits while anyone observes the store
    /// or listens for its changes, and not otherwise: an idle store with
    /// no reader costs nothing.
    private func watchOtherProcessesWhileObserved() {
        guard !isClosed, !observers.isEmpty || !localChangeContinuations.isEmpty else {
            otherProcesses.stop()
            return
        }
        guard otherProcesses.task == nil else { return }
        otherProcesses.seen = try? connection.dataVersion()
        otherProcesses.changed()
        let first = otherProcesses.wait
        otherProcesses.task = Task.detached { [weak self] in
            var wait = first
            while !Task.isCancelled {
                try? await Task.sleep(for: wait)
                guard let store = self else { return }
                wait = await store.checkOtherProcesses()
            }
        }
    }

    /// After another process (an extension on the same file) committed:
    /// every live read is read again, counts kept in memory are forgotten,
    /// and the sync engine hears of a local change, so the other process's
    /// captures are pushed from here.
    /// Returns how long to wait before the next look.
    @discardableResult
    package func checkOtherProcesses() -> Duration {
        otherProcesses.looks += 1
        guard !isClosed, let version = try? connection.dataVersion(), version != otherProcesses.seen else {
            return otherProcesses.quiet()
        }
        otherProcesses.seen = version
        otherProcesses.changed()
        liveCounts = LiveCounts()
        notify(Set(registry.all.map(\.name)).union([StoreObserver.conflictsKey]))
        localChangeContinuations.values.forEach { $0.yield() }
        return otherProcesses.wait
    }

    /// Looks for other processes' commits taken so far.
    package var otherProcessLooks: Int { otherProcesses.looks }

    /// How long an observed store waits before its next look for other
    /// processes' commits now (see ``OtherProcessWatch``).
    package var otherProcessLookWait: Duration { otherProcesses.wait }

    /// How often an observed store looks for other processes' commits right
    /// after one (200 ms unless set); the looks slow to at most `slowest`
    /// (1.5 s unless set) while none comes: the longest an extension's write
    /// waits to show.
    package func watchOtherProcesses(every interval: Duration, slowest: Duration? = nil) {
        otherProcesses.interval = interval
        otherProcesses.slowest = max(interval, slowest ?? OtherProcessWatch.slowestLook)
        otherProcesses.stop()
        watchOtherProcessesWhileObserved()
    }

    /// Wakes the observers of the collections a commit touched.
    func notify(_ collections: Set<String>) {
        guard !collections.isEmpty else { return }
        for observer in observers.values where observer.collections.map({ !$0.isDisjoint(with: collections) }) ?? true {
            observer.refresh()
        }
    }
}

/// The poll for other processes' commits: SQLite's `data_version`, read
/// on the store's connection, changes only when another connection
/// committed, and reading it costs no I/O. Right after a change it looks
/// every `interval`; each quiet look doubles the wait up to `slowest`,
/// so a thousand idle stores look about 700 times a second, not five
/// thousand, and another process's commit still shows within `slowest`.
struct OtherProcessWatch {
    /// The longest wait between looks unless set: another process's
    /// commit shows within it (the tests hold it under 2 s).
    static let slowestLook: Duration = .milliseconds(1_500)

    var task: Task<Void, Never>?
    /// The `data_version` last seen.
    var seen: Int64?
    var interval: Duration = .milliseconds(200)
    var slowest: Duration = Self.slowestLook
    /// The wait before the next look.
    private(set) var wait: Duration = .milliseconds(200)
    /// Looks taken so far (tests count them to see the watch idle).
    var looks = 0

    /// A change was seen (or the watch starts): look again soon.
    mutating func changed() { wait = interval }

    /// A look found nothing: the next one waits longer.
    mutating func quiet() -> Duration {
        wait = min(slowest, wait * 2)
        return wait
    }

    mutating func stop() {
        task?.cancel()
        task = nil
    }
}
