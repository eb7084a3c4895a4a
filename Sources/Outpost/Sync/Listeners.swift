import Foundation

/// The open streams of one kind of update the engine sends (status,
/// events, telemetry): each consumer gets its own stream, every value goes
/// to all of them, and a stream whose consumer stopped is dropped.
struct Listeners<Element: Sendable> {
    private var continuations: [UUID: AsyncStream<Element>.Continuation] = [:]

    /// A new stream keeping at most `newest` values a slow consumer has not
    /// read; `ended` is called with its id once the consumer stops.
    mutating func add(newest: Int, ended: @escaping @Sendable (UUID) -> Void)
        -> (stream: AsyncStream<Element>, continuation: AsyncStream<Element>.Continuation)
    {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: .bufferingNewest(newest))
        let id = UUID()
        continuations[id] = continuation
        continuation.onTermination = { _ in ended(id) }
        return (stream, continuation)
    }

    mutating func remove(_ id: UUID) { continuations.removeValue(forKey: id) }

    /// Whether anyone listens (an event worth building only then).
    var isEmpty: Bool { continuations.isEmpty }

    func yield(_ element: Element) {
        for continuation in continuations.values { continuation.yield(element) }
    }

    /// Ends every stream (the engine stopped).
    mutating func finishAll() {
        continuations.values.forEach { $0.finish() }
        continuations.removeAll()
    }
}
