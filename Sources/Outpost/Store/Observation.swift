import Foundation
import OutpostCore
import OutpostSQLite

/// A live query: re-runs after each commit that touched its collection.
struct QueryObserver {
    let collection: String
    let refresh: (RecordTables) -> Void
    let finish: () -> Void
}

extension LocalStore {
    /// An async sequence of a query's results: the current value first, then
    /// one value after each commit that touched the collection. Values are
    /// coalesced (a slow consumer sees the newest, never a backlog); the
    /// sequence ends when the consumer stops or the store closes.
    public func observe(_ query: RecordQuery) -> AsyncThrowingStream<[JSONRecord], any Error> {
        observe(query) { $0 }
    }

    /// Typed observation of a collection.
    public func observe<T: SyncRecord>(
        _ type: T.Type, where filter: RecordFilter? = nil, orderBy order: [RecordOrder] = []
    ) -> AsyncThrowingStream<[LocalRecord<T>], any Error> {
        observe(RecordQuery(T.collection, filter: filter, order: order)) { records in
            try records.map { record in try record.map { try RecordCoding.value(T.self, from: $0) } }
        }
    }

    private func observe<Element: Sendable>(
        _ query: RecordQuery, transform: @escaping @Sendable ([JSONRecord]) throws -> Element
    ) -> AsyncThrowingStream<Element, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: Element.self, throwing: (any Error).self, bufferingPolicy: .bufferingNewest(1))
        if isClosed {
            continuation.finish(throwing: StoreError.closed)
            return stream
        }
        do {
            _ = try registry.descriptor(query.collection)
        } catch {
            continuation.finish(throwing: error)
            return stream
        }
        let id = UUID()
        let observer = QueryObserver(
            collection: query.collection,
            refresh: { tables in
                do {
                    continuation.yield(try transform(try tables.query(query)))
                } catch {
                    continuation.finish(throwing: error)
                }
            },
            finish: { continuation.finish() })
        observers[id] = observer
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            Task { await self.removeObserver(id) }
        }
        observer.refresh(outbox.tables)
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
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            Task { await self.removeLocalChangeListener(id) }
        }
        return stream
    }

    private func removeLocalChangeListener(_ id: UUID) {
        localChangeContinuations.removeValue(forKey: id)
    }

    private func removeObserver(_ id: UUID) {
        observers.removeValue(forKey: id)
    }

    /// Wakes the observers of the collections a commit touched.
    func notify(_ collections: Set<String>) {
        guard !collections.isEmpty else { return }
        for observer in observers.values where collections.contains(observer.collection) {
            observer.refresh(outbox.tables)
        }
    }
}
