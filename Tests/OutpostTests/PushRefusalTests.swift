import Foundation
import Outpost
import OutpostCore
import Testing

/// A push refused whole, decided by the pipeline alone.
@Suite("Push refusals", .timeLimit(.minutes(1)))
struct PushRefusalTests {
    static let four: [(entry: Int64, seq: Int64?)] = [(1, 11), (2, 12), (3, 13), (4, 14)]

    @Test func aRefusalOneMutationCanCauseSplitsTheBatchUntilTheCulpritIsAlone() {
        var pipeline = PushPipeline(limit: 100)
        let tooDeep = SyncFailure.refused(ErrorBody(code: .invalidJSON, message: "too deep"))
        #expect(pipeline.refused(tooDeep, entries: Self.four) == .split(.invalidJSON))
        #expect(pipeline.limit == 2)
        #expect(pipeline.refused(tooDeep, entries: Array(Self.four.prefix(2))) == .split(.invalidJSON))
        #expect(pipeline.limit == 1)
        #expect(pipeline.refused(tooDeep, entries: [(1, 11)]) == .reject(ErrorBody(code: .invalidJSON, message: "too deep")))
        #expect(pipeline.limit == 1, "kept for the rest of the cycle")
    }

    @Test func aRefusalNoMutationCausedGoesBackWithTheBatch() {
        var pipeline = PushPipeline(limit: 100)
        let forbidden = ErrorBody(code: .forbidden, message: "no")
        #expect(pipeline.refused(.refused(forbidden), entries: Self.four) == .release(.permanent("forbidden: no")))
        #expect(pipeline.refused(.serverBusy(retryAfter: nil), entries: Self.four) == .release(.transient("server busy")))
        #expect(pipeline.refused(.offline, entries: Self.four) == .release(.notSent("offline")))
        #expect(pipeline.refused(.noAnswer, entries: Self.four) == .release(.unknownOutcome("no answer")))
        #expect(pipeline.limit == 100)
    }

    @Test func clientBehindRenumbersUntilTheSameChangesComeBackThreeTimes() {
        var pipeline = PushPipeline(limit: 100)
        let behind = SyncFailure.refused(ErrorBody(code: .clientBehind, message: "behind", lastSeq: 20, seqs: [11, 12]))
        #expect(pipeline.refused(behind, entries: Self.four) == .renumber(seqs: [11, 12], serverLastSeq: 20))
        #expect(pipeline.refused(behind, entries: Self.four) == .renumber(seqs: [11, 12], serverLastSeq: 20))
        #expect(pipeline.refused(behind, entries: Self.four) == .renumber(seqs: [11, 12], serverLastSeq: 20))
        #expect(pipeline.refused(behind, entries: Self.four) == .renumberingFruitless)
    }

    @Test func newChangesListedAreProgress() {
        var pipeline = PushPipeline(limit: 100)
        for seq in Int64(11)...14 {
            let behind = SyncFailure.refused(ErrorBody(code: .clientBehind, message: "behind", lastSeq: 20, seqs: [seq]))
            #expect(pipeline.refused(behind, entries: Self.four) == .renumber(seqs: [seq], serverLastSeq: 20))
        }
    }

    @Test func theServersLimitsAreAskedOnceACycle() {
        var pipeline = PushPipeline(limit: 100)
        #expect(pipeline.shouldLearnLimits(after: .refused(ErrorBody(code: .forbidden, message: "no"))) == false)
        #expect(pipeline.shouldLearnLimits(after: .noAnswer) == false)
        #expect(pipeline.shouldLearnLimits(after: .refused(ErrorBody(code: .payloadTooLarge, message: "big"))) == true)
        #expect(pipeline.shouldLearnLimits(after: .refused(ErrorBody(code: .payloadTooLarge, message: "big"))) == false)
    }
}
