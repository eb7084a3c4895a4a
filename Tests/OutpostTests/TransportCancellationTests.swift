import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// A request cancelled at the moment its answer arrives must end, one way or
/// the other. On Linux, `URLSession.data(for:)` cancels its task from inside
/// Swift's cancellation handler, while the cancelling thread holds the
/// task's status lock, and waits for the session's queue; that queue may at
/// the same moment be handing the answer to the same task, which needs the
/// lock. Both wait for ever. It hung `outpost bench` in a storm of 1,000
/// devices whose page requests were cancelled as they failed. Should it come
/// back, the threads of Swift's pool stop and this test cannot report it
/// itself: `scripts/test` ends the hung run and names this test as the one
/// that never finished.
@Suite("Cancelling requests", .timeLimit(.minutes(3)))
struct TransportCancellationTests {
    @Test func requestsCancelledAsTheirAnswersArriveAllEnd() async throws {
        let rig = try await LiveSyncRig()
        let transport = URLSessionTransport(baseURL: rig.base)

        // How long an answer takes here, so that cancellations fall around it.
        let clock = ContinuousClock()
        let started = clock.now
        for _ in 0..<20 { _ = try await transport.send(TransportRequest(method: "GET", target: "/v1/health", timeout: 10)) }
        let answerMicroseconds = max(50, Int((clock.now - started) / .microseconds(1)) / 20)

        let outcomes = Locked((answered: 0, cancelled: 0))
        try await awaitBounded("3,000 requests, each cancelled around the time of its answer, all ended", within: .seconds(120)) {
            for round in 0..<300 {
                await withTaskGroup(of: Void.self) { group in
                    for index in 0..<10 {
                        let request = Task {
                            try await transport.send(TransportRequest(method: "GET", target: "/v1/health", timeout: 10))
                        }
                        group.addTask {
                            // From no wait to twice an answer's time, spread over the round.
                            let wait = (round * 10 + index) * 7 % (2 * answerMicroseconds)
                            try? await Task.sleep(for: .microseconds(wait))
                            request.cancel()
                            let ended = await request.result
                            outcomes.withLock { if (try? ended.get()) != nil { $0.answered += 1 } else { $0.cancelled += 1 } }
                        }
                    }
                }
            }
        }
        let final = outcomes.current
        #expect(final.answered + final.cancelled == 3_000)
        // The cancellations fell on both sides of the answers, so the moment
        // between them (where the deadlock was) was crossed many times.
        #expect(final.answered > 0 && final.cancelled > 0, "answered \(final.answered), cancelled \(final.cancelled)")
        print("TransportCancellation: \(final.answered) answered, \(final.cancelled) cancelled; an answer took about \(answerMicroseconds) µs")
    }
}
