#if canImport(Observation)
public import Foundation
public import Observation

/// A live read as an `@Observable` object for SwiftUI: a view reads
/// ``value`` and redraws when a commit changes it.
///
/// Made with `await`, it holds the current value before the view first
/// draws (no empty frame):
///
/// ```swift
/// @State private var people: LiveQuery<[LocalRecord<Person>]>?
///
/// var body: some View {
///     List(people?.value ?? []) { Text($0.value.name) }
///         .task { people = await .records(Person.self, in: store, orderBy: [.field("name")]) }
/// }
/// ```
///
/// It follows the store until ``stop()`` or until it is released; an error
/// ends it and stays in ``error``.
@MainActor
@Observable
public final class LiveQuery<Value: Sendable> {
    /// The read's current result.
    public private(set) var value: Value
    /// Why the read ended, if it failed (the store closed, a record type
    /// that no longer decodes).
    public private(set) var error: (any Error)?
    @ObservationIgnored private var follower: Task<Void, Never>?

    /// Follows `stream`, starting from `initial` (its first element, already read).
    init(initial: Value, following stream: AsyncThrowingStream<Value, any Error>) {
        value = initial
        follower = Task { [weak self] in
            do {
                for try await next in stream {
                    guard let self else { return }
                    self.value = next
                }
            } catch {
                self?.error = error
            }
        }
    }

    /// Reads the stream's first element, then follows the rest.
    package static func start(_ stream: AsyncThrowingStream<Value, any Error>, empty: Value) async -> LiveQuery<Value> {
        var iterator = stream.makeAsyncIterator()
        do {
            let first = try await iterator.next() ?? empty
            return LiveQuery(initial: first, following: stream)
        } catch {
            let query = LiveQuery(initial: empty, following: AsyncThrowingStream { $0.finish() })
            query.error = error
            return query
        }
    }

    /// Stops following the store; ``value`` keeps its last result.
    public func stop() {
        follower?.cancel()
        follower = nil
    }

    // Not `isolated deinit`: that needs Swift 6.2 and, below iOS 18.4, a
    // back-deployed hop to the main actor. Cancelling a task needs no isolation.
    deinit {
        follower?.cancel()
    }
}

extension LiveQuery {
    /// Records of a type matching a filter, in an order, at most `limit`.
    public static func records<T: SyncRecord>(
        _ type: T.Type, in store: LocalStore, where filter: FieldFilter<T>? = nil, orderBy order: [FieldOrder<T>] = [],
        limit: Int? = nil
    ) async -> LiveQuery<[LocalRecord<T>]> where Value == [LocalRecord<T>] {
        await start(await store.observe(type, where: filter, orderBy: order, limit: limit), empty: [])
    }

    /// One record (nil while it does not exist).
    public static func record<T: SyncRecord>(_ type: T.Type, _ uuid: UUID, in store: LocalStore) async -> LiveQuery<LocalRecord<T>?>
    where Value == LocalRecord<T>? {
        await start(await store.observe(type, uuid), empty: nil)
    }

    /// How many records of a type match a filter.
    public static func count<T: SyncRecord>(_ type: T.Type, in store: LocalStore, where filter: FieldFilter<T>? = nil) async
        -> LiveQuery<Int> where Value == Int
    {
        await start(await store.observeCount(type, where: filter), empty: 0)
    }

    /// Edits that lost to a newer server copy.
    public static func conflicts(in store: LocalStore) async -> LiveQuery<[ConflictReport]> where Value == [ConflictReport] {
        await start(await store.observeConflicts(), empty: [])
    }

    /// Records whose last change the server refused.
    public static func rejected(in store: LocalStore) async -> LiveQuery<[JSONRecord]> where Value == [JSONRecord] {
        await start(await store.observeRejected(), empty: [])
    }

    /// Changes held behind a refused parent.
    public static func held(in store: LocalStore) async -> LiveQuery<[HeldEntry]> where Value == [HeldEntry] {
        await start(await store.observeHeld(), empty: [])
    }
}
#endif
