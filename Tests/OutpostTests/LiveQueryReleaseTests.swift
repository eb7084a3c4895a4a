#if canImport(Observation)
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// A view that goes away releases its live query: the query's read of the
/// store ends then, with no `stop()` and no hop to the main actor.
@Suite("LiveQuery release", .timeLimit(.minutes(1)))
struct LiveQueryReleaseTests {
    @MainActor
    @Test func releasingALiveQueryEndsItsRead() async throws {
        let (stream, continuation) = AsyncThrowingStream<Int, any Error>.makeStream()
        let ended = Locked(false)
        continuation.onTermination = { _ in ended.withLock { $0 = true } }
        continuation.yield(1)
        var query: LiveQuery<Int>? = await LiveQuery.start(stream, empty: 0)
        #expect(query?.value == 1)

        // Held, it keeps reading.
        try await Task.sleep(for: .milliseconds(200))
        #expect(ended.withLock { $0 } == false, "the read ended while the query was still held")

        query = nil
        #expect(query == nil)
        try await eventually("the released query's read of the stream to end", timeout: .seconds(10)) {
            ended.withLock { $0 }
        }
    }
}
#endif
