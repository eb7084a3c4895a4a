import Foundation
import Outpost
import OutpostCore
import Testing

/// Callers waiting for a cycle, alone: each is answered exactly once, with
/// the right report.
@Suite("Cycle waiters", .timeLimit(.minutes(1)))
struct CycleWaitersTests {
    /// The answers each waiter got, in order.
    final class Answers {
        var got: [UInt64: [SyncReport?]] = [:]
    }

    static func report(_ trigger: SyncTrigger) -> SyncReport { SyncReport(trigger: trigger) }

    @Test func aFinishedCycleAnswersThoseWaitingForItOrAnEarlierOne() {
        var waiters = CycleWaiters()
        let answers = Answers()
        var ids: [Int: UInt64] = [:]
        for target in 1...3 {
            let id = waiters.reserve()
            ids[target] = id
            waiters.wait(for: target, id: id) { answers.got[id, default: []].append($0) }
        }
        waiters.finished(2, report: Self.report(.launch))
        #expect(answers.got[ids[1]!] == [Self.report(.launch)])
        #expect(answers.got[ids[2]!] == [Self.report(.launch)])
        #expect(answers.got[ids[3]!] == nil, "its cycle has not run yet")
        #expect(waiters.count == 1)
        #expect(waiters.lastReport == Self.report(.launch))
        waiters.finished(3, report: Self.report(.manual))
        #expect(answers.got[ids[3]!] == [Self.report(.manual)])
        #expect(answers.got[ids[1]!]?.count == 1, "answered once only")
    }

    @Test func aTimeoutAnswersOnlyThoseWaitingForThatCycle() {
        var waiters = CycleWaiters()
        let answers = Answers()
        let first = waiters.reserve()
        waiters.wait(for: 4, id: first) { answers.got[first, default: []].append($0) }
        let second = waiters.reserve()
        waiters.wait(for: 5, id: second) { answers.got[second, default: []].append($0) }
        waiters.expire(4)
        #expect(answers.got[first]?.first??.failure == .timedOut)
        #expect(answers.got[second] == nil)
        #expect(waiters.lastReport == nil, "a timeout is no cycle's report")
        waiters.finished(5, report: Self.report(.manual))
        #expect(answers.got[first]?.count == 1)
        #expect(answers.got[second] == [Self.report(.manual)])
    }

    @Test func aCancelledCallerIsAnsweredNilAndForgotten() {
        var waiters = CycleWaiters()
        let answers = Answers()
        let id = waiters.reserve()
        waiters.wait(for: 1, id: id) { answers.got[id, default: []].append($0) }
        waiters.cancel(id)
        #expect(answers.got[id]?.count == 1)
        #expect(answers.got[id]?.first == .some(nil))
        waiters.cancel(id)
        waiters.finished(1, report: Self.report(.manual))
        #expect(answers.got[id]?.count == 1, "nothing more after a cancellation")
        #expect(waiters.reserve() != id, "ids are never reused")
    }

    @Test func aWipeForgetsTheLastReport() {
        var waiters = CycleWaiters()
        waiters.finished(1, report: Self.report(.manual))
        waiters.forgetLastReport()
        #expect(waiters.lastReport == nil)
    }

    /// The reports after a mark are those of the cycles numbered after it,
    /// oldest first; only the last ones are kept, and a wipe forgets them.
    @Test func theReportsAfterAMarkAreTheCyclesNumberedAfterIt() {
        var waiters = CycleWaiters()
        for number in 1...3 {
            var report = SyncReport(trigger: .manual)
            report.confirmed = number
            waiters.finished(number, report: report)
        }
        #expect(waiters.reports(after: 1).map(\.confirmed) == [2, 3])
        #expect(waiters.reports(after: 3).isEmpty)
        for number in 4...(CycleWaiters.reportsKept + 10) { waiters.finished(number, report: SyncReport(trigger: .retry)) }
        #expect(waiters.reports(after: 0).count == CycleWaiters.reportsKept)
        waiters.forgetLastReport()
        #expect(waiters.reports(after: 0).isEmpty, "the last person's reports are gone with the wipe")
    }

    /// A sync tried again after a busy server says what the stopped cycles
    /// did too: a change confirmed before the pull met the busy server is
    /// not sent again, and must not go unsaid.
    @Test func aReportIncludesWhatAnEarlierCycleDidBeforeItStopped() {
        var stopped = SyncReport(trigger: .manual)
        stopped.sent = 3
        stopped.confirmed = 1
        stopped.received = 18
        stopped.attachmentsUploaded = 2
        stopped.attachmentBytesSent = 2_048
        stopped.failure = .serverBusy(retryAfter: 1)
        var last = SyncReport(trigger: .manual)
        last.received = 3
        last.confirmed = 1
        last.sent = 1
        last.include(stopped)
        #expect(last.sent == 2, "sends the busy server refused are counted when sent again")
        #expect(last.confirmed == 2)
        #expect(last.received == 3)
        #expect(last.attachmentsUploaded == 2)
        #expect(last.attachmentBytesSent == 2_048)
        #expect(last.failure == nil, "the sync as a whole succeeded")
    }
}
